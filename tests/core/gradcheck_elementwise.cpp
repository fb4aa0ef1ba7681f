// tests/core/gradcheck_elementwise.cpp — the backward of add, sub, mul, div, the scalar variants, pow,
// exp, log, tanh, sigmoid and relu against finite differences, with broadcasting, repeated inputs
// f(x, x) and an operand that needs no grad; a broadcast op that forgets to sum its gradient back
// must fail.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_elementwise && build/tests/gradcheck_elementwise`.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== elementwise, broadcasting ====================================================================

TEST_CASE("gradcheck add/sub/mul/div - same shapes", "[gradcheck][elementwise]") {
    manual_seed(1);
    Tensor a = leaf({2, 3}), b = leaf({2, 3}), c = positive_leaf({2, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return add(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return sub(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return mul(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return div(v[0], v[1]); }, a, c);
    REQUIRE_GRADCHECK([](const auto& v) { return neg(v[0]); }, a);
}

TEST_CASE("gradcheck broadcasting (2x3)⊕(3x) - (2x1)⊕(1x3) - (2x3)⊕() and (4x1x3)⊕(2x1)", "[gradcheck][elementwise][broadcast]") {
    manual_seed(2);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{2, 3}, {}}, {{4, 1, 3}, {2, 1}}, {{3}, {2, 3}}};
    for (const auto& [sa, sb] : cases) {
        INFO("shapes " << shape_str(sa) << " and " << shape_str(sb));
        Tensor a = leaf(sa), b = leaf(sb), pb = positive_leaf(sb);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] + v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] - v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] * v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] / v[1]; }, a, pb);
        REQUIRE_GRADCHECK([](const auto& v) { return v[1] / v[0]; }, positive_leaf(sa), b);
    }
}

TEST_CASE("gradcheck with one operand that does not require grad", "[gradcheck][elementwise]") {
    manual_seed(3);
    Tensor a = leaf({2, 3});
    Tensor constant = randn({3});
    REQUIRE_GRADCHECK([constant](const auto& v) { return v[0] * constant; }, a);
    REQUIRE_GRADCHECK([constant](const auto& v) { return constant / (v[0] * v[0] + 1); }, a);
}

TEST_CASE("gradcheck repeated inputs f(x x x)", "[gradcheck][repeated]") {
    manual_seed(4);
    Tensor x = leaf({3, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return mul(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return add(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return sub(v[0] * 3, v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return div(v[0], v[0] * v[0] + 1); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[0].transpose(0, 1)); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0] * 2, v[0]}, 1); }, x);
    // A diamond: h feeds three consumers.
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            Tensor h = v[0].tanh();
            return h * h + h.exp() - sum(h, 0, true);
        },
        x);
}

TEST_CASE("gradcheck scalar variants", "[gradcheck][scalar]") {
    manual_seed(5);
    Tensor x = leaf({2, 3}), p = positive_leaf({2, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] + 2.5; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return 2.5 - v[0]; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] * -1.5; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] / 4.0; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return 3.0 / v[0]; }, p);
}

// ==== pointwise ======================================================================================

TEST_CASE("gradcheck pow - exp - log - tanh - sigmoid", "[gradcheck][pointwise]") {
    manual_seed(6);
    Tensor x = leaf({3, 4}), p = positive_leaf({3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 3); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 2.5); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], -1.5); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return exp(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return log(v[0]); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return tanh(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return sigmoid(v[0]); }, x);
    // Both branches of sigmoid's stable form, well away from 0.
    REQUIRE_GRADCHECK([](const auto& v) { return sigmoid(v[0]); }, Tensor({-8, -3, -0.5, 0.5, 3, 8}, true));
}

TEST_CASE("gradcheck relu away from its kink", "[gradcheck][pointwise]") {
    Tensor x({{-1.5, 0.3, 2}, {0.7, -0.2, -3}}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return relu(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return relu(v[0] * v[0] - 1); }, x);
}

TEST_CASE("mutation: a broadcast op that forgets to sum its gradient back fails", "[gradcheck][mutation]") {
    manual_seed(19);
    Tensor a = leaf({2, 3}), b = leaf({3});
    // y = a + b with b's gradient taken from row 0 only instead of summed over the rows.
    auto bad_add = [](const std::vector<Tensor>& v) {
        Array y = v[0].data() + v[1].data();
        return make_result(std::move(y), "bad_add", {v[0], v[1]}, [](const Array& g, const Array&) {
            Array gb = xt::view(g, 0, xt::all());
            return Grads{g, gb};
        });
    };
    GradcheckResult r = gradcheck(bad_add, {a, b});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Contains("input 1"));
}
