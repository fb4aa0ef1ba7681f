// tests/core/test_elementwise.cpp — values and gradients of core/elementwise.cpp, by hand (float32).
//
// Covers: add/sub/mul/div/neg with broadcasting and their summed-back gradients; the scalar
// variants; pow/exp/log/tanh/relu/sigmoid; broadcasting over empty tensors; the errors of shapes
// that do not broadcast. Each gradient is checked by seeding backward with a gradient G whose
// entries differ, so a transposed or misplaced entry shows. Shapes in comments: (rows, cols).
// The double-precision gradchecks are in gradcheck_elementwise.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmanipulation.hpp>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/detail/permute.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// ==== elementwise, broadcasting =======================================================================

TEST_CASE("add (2x3) + (3x): value - and b's gradient summed over rows", "[ops][broadcast]") {
    Tensor a({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor b({10, 20, 30}, true);
    Tensor y = a + b;
    require_values(y, {{11, 22, 33}, {14, 25, 36}});
    REQUIRE(y.grad_fn()->name == "add");
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1, 2, 3}, {4, 5, 6}});
    require_values(b.grad(), {5, 7, 9});
}

TEST_CASE("add of a 0-d scalar tensor broadcasts to every element", "[ops][broadcast]") {
    Tensor a({{1, 2}, {3, 4}}, true);
    Tensor s(10.0, true);
    Tensor y = s + a;
    require_values(y, {{11, 12}, {13, 14}});
    y.backward(Tensor({{1, 2}, {3, 4}}));
    REQUIRE(s.grad().shape() == Shape{});
    REQUIRE(s.grad().item() == 10.0f);
    require_values(a.grad(), {{1, 2}, {3, 4}});
}

TEST_CASE("sub (2x3) - (3x): b's gradient is minus the row sum", "[ops][broadcast]") {
    Tensor a({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor b({10, 20, 30}, true);
    Tensor y = a - b;
    require_values(y, {{-9, -18, -27}, {-6, -15, -24}});
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1, 2, 3}, {4, 5, 6}});
    require_values(b.grad(), {-5, -7, -9});
}

TEST_CASE("mul (2x1) * (1x3): an outer product - gradients summed back to (2x1) and (1x3)", "[ops][broadcast]") {
    Tensor a({{1}, {2}}, true);
    Tensor b({{3, 4, 5}}, true);
    Tensor y = a * b;
    require_values(y, {{3, 4, 5}, {6, 8, 10}});
    // dL/da[i] = Σ_j G[i,j] b[j];  dL/db[j] = Σ_i G[i,j] a[i]
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1 * 3 + 2 * 4 + 3 * 5}, {4 * 3 + 5 * 4 + 6 * 5}});  // 26, 62
    require_values(b.grad(), {{1 + 4 * 2, 2 + 5 * 2, 3 + 6 * 2}});                  // 9, 12, 15
}

TEST_CASE("div (2x2) / (2x): dL/db = -Σ_rows g·a/b²", "[ops][broadcast]") {
    Tensor a({{2, 4}, {6, 8}}, true);
    Tensor b({1, 2}, true);
    Tensor y = a / b;
    require_values(y, {{2, 2}, {6, 4}});
    y.sum().backward();
    require_values(a.grad(), {{1, 0.5}, {1, 0.5}});
    require_values(b.grad(), {-(2 + 6) / 1.0, -(4 + 8) / 4.0});  // -8, -3
}

TEST_CASE("neg", "[ops]") {
    Tensor a({1, -2}, true);
    Tensor y = -a;
    require_values(y, {-1, 2});
    y.backward(Tensor({3, 4}));
    require_values(a.grad(), {-3, -4});
}

TEST_CASE("scalar variants: a+s - s+a - a-s - s-a - a*s - s*a - a/s - s/a", "[ops][scalar]") {
    Tensor a({1, 2, 4}, true);
    require_values(a + 2, {3, 4, 6});
    require_values(2 + a, {3, 4, 6});
    require_values(a - 2, {-1, 0, 2});
    require_values(2 - a, {1, 0, -2});
    require_values(a * 3, {3, 6, 12});
    require_values(3 * a, {3, 6, 12});
    require_values(a / 4, {0.25, 0.5, 1});
    require_values(8 / a, {8, 4, 2});

    auto grad_of = [&](const Tensor& y) {
        a.reset_grad();
        y.sum().backward();
        return a.grad();
    };
    require_values(grad_of(a + 2), {1, 1, 1});
    require_values(grad_of(2 - a), {-1, -1, -1});
    require_values(grad_of(a * 3), {3, 3, 3});
    require_values(grad_of(a / 4), {0.25, 0.25, 0.25});
    require_values(grad_of(8 / a), {-8, -2, -0.5});  // -8 / a²
}

// ==== pointwise =========================================================================================

TEST_CASE("pow: integer and fractional exponents", "[ops][pointwise]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = x.pow(3);
    require_values(y, {1, 8, 27});
    y.sum().backward();
    require_values(x.grad(), {3, 12, 27});  // 3x²

    Tensor r({4, 9}, true);
    Tensor s = pow(r, 0.5);
    require_values(s, {2, 3});
    s.sum().backward();
    require_values(r.grad(), {0.25, 1.0 / 6});  // 0.5 / √x
}

TEST_CASE("pow with exponent 0: y = 1 and the gradient is exactly 0 - also at x = 0", "[ops][pointwise]") {
    Tensor x({0, 2, -3}, true);
    Tensor y = x.pow(0);
    require_values(y, {1, 1, 1});
    y.sum().backward();
    REQUIRE(all_finite(x.grad()));
    require_values(x.grad(), {0, 0, 0});

    Tensor z({0, 2}, true);  // x¹ at 0: 1 · 0⁰ = 1
    z.pow(1).sum().backward();
    require_values(z.grad(), {1, 1});
}

TEST_CASE("exp and log", "[ops][pointwise]") {
    const real e = std::exp(real(1));
    Tensor x({0, 1, -1}, true);
    Tensor y = x.exp();
    require_values(y, {1, e, 1 / e});
    y.sum().backward();
    require_values(x.grad(), {1, e, 1 / e});

    Tensor p({1, e, 0.5}, true);
    Tensor l = p.log();
    require_values(l, {0, 1, std::log(real(0.5))});
    l.sum().backward();
    require_values(p.grad(), {1, 1 / e, 2});
}

TEST_CASE("tanh: value and 1 - tanh²", "[ops][pointwise]") {
    Tensor x({0, 0.5, -2}, true);
    Tensor y = x.tanh();
    require_values(y, {0, 0.46211715726, -0.96402758008});
    y.sum().backward();
    require_values(x.grad(), {1, 0.78644773296, 0.07065082485});
}

TEST_CASE("relu: gradient 1 where x > 0 - else 0 (also at x = 0)", "[ops][pointwise]") {
    Tensor x({-1, 0, 2, 0.5}, true);
    Tensor y = x.relu();
    require_values(y, {0, 0, 2, 0.5});
    y.backward(Tensor({10, 20, 30, 40}));
    require_values(x.grad(), {0, 0, 30, 40});
}

TEST_CASE("sigmoid: values - y(1-y) - and no overflow at ±100", "[ops][pointwise]") {
    Tensor x({0, 2, -2, 100, -100}, true);
    Tensor y = x.sigmoid();
    REQUIRE(all_finite(y));
    require_values(y, {0.5, 0.88079707798, 0.11920292202, 1, 0});
    REQUIRE(y.at({4}) >= 0);
    y.sum().backward();
    REQUIRE(all_finite(x.grad()));
    require_values(x.grad(), {0.25, 0.10499358540, 0.10499358540, 0, 0});
}

// ==== bad input ===================================================================================================

TEST_CASE("broadcast shape mismatches throw ValueError naming the op and both shapes", "[ops][errors]") {
    Tensor a = ones({2, 3}), b = ones({4});
    REQUIRE_THROWS_AS(add(a, b), ValueError);
    REQUIRE_THROWS_AS(add(a, b), std::invalid_argument);
    REQUIRE_THROWS_WITH(add(a, b), Contains("add") && Contains("(2, 3)") && Contains("(4)"));
    REQUIRE_THROWS_WITH(sub(a, b), Contains("sub"));
    REQUIRE_THROWS_WITH(mul(a, b), Contains("mul"));
    REQUIRE_THROWS_WITH(div(a, b), Contains("div"));
    REQUIRE_THROWS_WITH(a * ones({3, 3}), Contains("mul") && Contains("(3, 3)"));
}

// ---- bug 4 ---------------------------------------------------------------------------------------
TEST_CASE("bug 4: broadcasting and softmax backward over empty tensors", "[reliability][bug4][regression]") {
    SECTION("(0, 3) - (0, 1)") {
        Tensor a = zeros({0, 3}, true), b = zeros({0, 1}, true);
        (a - b).sum().backward();
        REQUIRE(a.grad().shape() == Shape{0, 3});
        REQUIRE(b.grad().shape() == Shape{0, 1});
    }
    SECTION("(1, 3) broadcast over (0, 3) gets a zero gradient") {
        Tensor a = ones({1, 3}, true), b = zeros({0, 3}, true);
        (a * b).sum().backward();
        require_values(a.grad(), zeros({1, 3}));
    }
    SECTION("softmax over dim 1 of a (0, 3) tensor") {
        Tensor x = zeros({0, 3}, true);
        Tensor y = softmax(x, 1);
        REQUIRE(y.shape() == Shape{0, 3});
        y.sum().backward();
        REQUIRE(x.grad().shape() == Shape{0, 3});
    }
}
