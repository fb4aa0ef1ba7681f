// tests/core/gradcheck_gradcheck.cpp — the checker of core/gradcheck.hpp itself: it passes a correct
// backward (y = x³, a two-layer MLP with a log_softmax NLL), fails deliberately wrong ones, and
// refuses inputs that need no grad.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_gradcheck && build/tests/gradcheck_gradcheck`.
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

// ==== composites ===============================================================================================

TEST_CASE("gradcheck a two-layer MLP with a log_softmax NLL", "[gradcheck][composite]") {
    manual_seed(17);
    Tensor x = leaf({4, 3}), w1 = leaf({3, 5}), b1 = leaf({5}), w2 = leaf({5, 2}), b2 = leaf({2});
    const IndexTensor targets{0, 3, 5, 6};  // flat positions (row·2 + class) of each row's class
    REQUIRE_GRADCHECK(
        [targets](const auto& v) {
            Tensor h = tanh(matmul(v[0], v[1]) + v[2]);
            Tensor logp = log_softmax(matmul(h, v[3]) + v[4], 1);
            return -index_select(logp.reshape({-1}), 0, targets).mean();
        },
        x, w1, b1, w2, b2);
}

// ==== mutation tests: gradcheck must reject a wrong backward ======================================================

namespace {
// y = x³ with a chosen (possibly wrong) backward.
Tensor cube_with(const Tensor& x, std::function<Array(const Array& g, const Array& x)> bwd) {
    Array y = x.data() * x.data() * x.data();
    return make_result(std::move(y), "cube", {x}, [x = x.data(), bwd](const Array& g, const Array&) {
        return Grads{bwd(g, x)};
    });
}
}  // namespace

TEST_CASE("mutation: the correct cube backward passes - wrong ones fail", "[gradcheck][mutation]") {
    manual_seed(18);
    Tensor x = leaf({2, 3});
    const auto right = [](const Array& g, const Array& x) { return Array(3 * g * x * x); };
    const auto wrong_formula = [](const Array& g, const Array& x) { return Array(2 * g * x); };
    const auto lost_factor = [](const Array& g, const Array& x) { return Array(g * x * x); };
    const auto small_error = [](const Array& g, const Array& x) { return Array(3.01 * g * x * x); };

    REQUIRE_GRADCHECK([&](const auto& v) { return cube_with(v[0], right); }, x);
    using Backward = std::function<Array(const Array&, const Array&)>;
    for (const Backward& bad : {Backward(wrong_formula), Backward(lost_factor), Backward(small_error)}) {
        GradcheckResult r = gradcheck([&](const auto& v) { return cube_with(v[0], bad); }, {x});
        REQUIRE_FALSE(r.ok);
        REQUIRE_THAT(r.message, Contains("analytic") && Contains("numeric"));
        REQUIRE(r.max_abs_error > 0);
    }
    // The 1% error passes once the tolerance is loose enough: options chain as LibTorch's.
    const auto loose = GradcheckOptions().eps(1e-6).atol(0).rtol(0.02);
    REQUIRE(loose.eps() == 1e-6);
    REQUIRE(loose.atol() == 0);
    REQUIRE(gradcheck([&](const auto& v) { return cube_with(v[0], small_error); }, {x}, loose).ok);
}

TEST_CASE("gradcheck refuses a step or a tolerance outside its range", "[gradcheck][errors]") {
    const auto square_sum = [](const std::vector<Tensor>& v) { return sum(v[0] * v[0]); };
    const Tensor x({1, 2}, /*requires_grad=*/true);
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    for (double eps : {0.0, -1.0, nan, inf})
        REQUIRE_THROWS_WITH(gradcheck(square_sum, {x}, GradcheckOptions().eps(eps)),
                            Contains("gradcheck") && Contains("eps must be finite and > 0"));
    for (double tol : {-1.0, nan, inf}) {
        REQUIRE_THROWS_WITH(gradcheck(square_sum, {x}, GradcheckOptions().atol(tol)),
                            Contains("gradcheck") && Contains("atol must be finite and >= 0"));
        REQUIRE_THROWS_WITH(gradcheck(square_sum, {x}, GradcheckOptions().rtol(tol)),
                            Contains("gradcheck") && Contains("rtol must be finite and >= 0"));
    }
    REQUIRE(gradcheck(square_sum, {x}, GradcheckOptions().atol(0).rtol(1e-3)).ok);  // 0 is a valid tolerance
}

TEST_CASE("gradcheck refuses inputs that need no grad", "[gradcheck][errors]") {
    REQUIRE_THROWS_AS(gradcheck([](const auto& v) { return v[0] * 2; }, {Tensor({1, 2})}), ValueError);
    REQUIRE_THROWS_WITH(gradcheck([](const auto& v) { return v[0] * 2; }, {Tensor({1, 2})}),
                        Contains("gradcheck") && Contains("no input requires grad"));
}
