// tests/core/test_reduction.cpp — sum, mean, max, argmax and cumsum of core/reduction.cpp (float32): all
// elements and along a dim, keepdim, the gradient of max going to the maximum only, NaN
// propagating as in PyTorch, and a bad dim's error. Gradchecks: gradcheck_reduction.cpp.
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

// ==== reductions =========================================================================================

TEST_CASE("sum over all elements and along a dim - with keepdim", "[ops][reduce]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor total = x.sum();
    REQUIRE(total.shape() == Shape{});
    REQUIRE(total.item() == 21.0f);
    require_values(x.sum(0), {5, 7, 9});
    require_values(x.sum(1), {6, 15});
    require_values(x.sum(-1), {6, 15});
    require_values(x.sum(1, true), {{6}, {15}});
    require_values(x.sum(0, true), {{5, 7, 9}});

    x.sum(1).backward(Tensor({1, 2}));
    require_values(x.grad(), {{1, 1, 1}, {2, 2, 2}});
    x.reset_grad();
    x.sum(0, true).backward(Tensor({{1, 2, 3}}));
    require_values(x.grad(), {{1, 2, 3}, {1, 2, 3}});
}

TEST_CASE("sum along the middle dim of a (2x3x4) tensor", "[ops][reduce]") {
    // x[i, j, k] = 12i + 4j + k;  Σ_j = 36i + 12 + 3k
    Tensor x = arange(24).reshape({2, 3, 4});
    Tensor y = x.sum(1);
    require_values(y, {{12, 15, 18, 21}, {48, 51, 54, 57}});
    require_values(x.sum(-2, true), Tensor({{{12, 15, 18, 21}}, {{48, 51, 54, 57}}}));
}

TEST_CASE("sum of many floats is accumulated precisely", "[ops][reduce]") {
    // A float accumulator stops at 2^24 = 16,777,216; the exact sum is 2e7.
    Tensor x = ones({20000000});
    REQUIRE(x.sum().item() == 20000000.0f);
}

TEST_CASE("mean over all elements and along a dim", "[ops][reduce]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor m = x.mean();
    REQUIRE(m.item() == Approx(3.5));
    m.backward();
    require_values(x.grad(), {{1 / 6.0, 1 / 6.0, 1 / 6.0}, {1 / 6.0, 1 / 6.0, 1 / 6.0}});
    x.reset_grad();
    require_values(x.mean(0), {2.5, 3.5, 4.5});
    require_values(x.mean(1, true), {{2}, {5}});
    x.mean(0).backward(Tensor({2, 4, 6}));
    require_values(x.grad(), {{1, 2, 3}, {1, 2, 3}});
}

TEST_CASE("max over all elements: the gradient goes to the maximum only", "[ops][reduce]") {
    Tensor x({{1, 5, 3}, {4, 2, 0}}, true);
    Tensor m = x.max();
    REQUIRE(m.shape() == Shape{});
    REQUIRE(m.item() == 5.0f);
    (m * 3).backward();
    require_values(x.grad(), {{0, 3, 0}, {0, 0, 0}});
}

TEST_CASE("max along a dim - with keepdim - and argmax", "[ops][reduce]") {
    Tensor x({{1, 5, 3}, {4, 2, 0}}, true);
    require_values(x.max(1), {5, 4});
    require_values(x.max(0, true), {{4, 5, 3}});
    require_values(x.max(-1, true), {{5}, {4}});
    IndexTensor am = argmax(x, 1);
    REQUIRE(am.shape() == Shape{2});
    REQUIRE(am[0] == 1);
    REQUIRE(am[1] == 0);
    REQUIRE(argmax(x, 0, true).shape() == Shape{1, 3});

    x.max(1).backward(Tensor({1, 2}));
    require_values(x.grad(), {{0, 1, 0}, {2, 0, 0}});
    x.reset_grad();
    x.max(0, true).backward(Tensor({{10, 20, 30}}));
    require_values(x.grad(), {{0, 20, 30}, {10, 0, 0}});
}

TEST_CASE("a bad dim throws ValueError with the valid range", "[ops][errors]") {
    Tensor x = ones({2, 3});
    REQUIRE_THROWS_AS(x.sum(5), ValueError);
    REQUIRE_THROWS_WITH(x.sum(5), Contains("sum") && Contains("dim 5") && Contains("[-2, 2)"));
    REQUIRE_THROWS_WITH(x.sum(-3), Contains("sum") && Contains("dim -3"));
    REQUIRE_THROWS_WITH(x.mean(2), Contains("mean"));
    REQUIRE_THROWS_WITH(x.max(2), Contains("max"));
    REQUIRE_THROWS_WITH(x.softmax(2), Contains("dim 2"));
    REQUIRE_THROWS_WITH(x.transpose(0, 2), Contains("transpose"));
    REQUIRE_THROWS_WITH(concat({x, x}, 2), Contains("concat"));
    REQUIRE_THROWS_WITH(argmax(x, 3), Contains("argmax"));
}

// ---- NaN propagation ------------------------------------------------------------------------------
// Values from tests/reference/reliability_nan.py (torch 1.13.1).
TEST_CASE("NaN propagates through relu max and argmax as in PyTorch", "[reliability][nan][regression]") {
    SECTION("relu(NaN) = NaN; its gradient passes (threshold_backward: x <= 0 ? 0 : g)") {
        Tensor x({1, kNaN, -3}, true);
        Tensor y = relu(x);
        REQUIRE(y.data()(0) == 1);
        REQUIRE(std::isnan(y.data()(1)));
        REQUIRE(y.data()(2) == 0);
        y.sum().backward();
        require_values(x.grad(), Tensor({1, 1, 0}));
    }
    SECTION("max([1, NaN, 3]) = NaN, the gradient goes to the NaN") {
        Tensor x({1, kNaN, 3}, true);
        Tensor m = max(x);
        REQUIRE(std::isnan(m.item()));
        m.backward();
        require_values(x.grad(), Tensor({0, 1, 0}));
    }
    SECTION("max(dim) and argmax pick the first NaN") {
        const Tensor m({{1, kNaN, 3}, {4, 2, kNaN}, {5, 6, 2}});
        // torch.max(m, 1) = ([nan, nan, 6], [1, 2, 1]); torch.max(m, 0) = ([5, nan, nan], [2, 0, 1])
        const Tensor r1 = max(m, 1), r0 = max(m, 0);
        REQUIRE(std::isnan(r1.data()(0)));
        REQUIRE(std::isnan(r1.data()(1)));
        REQUIRE(r1.data()(2) == 6);
        REQUIRE(r0.data()(0) == 5);
        REQUIRE(std::isnan(r0.data()(1)));
        REQUIRE(std::isnan(r0.data()(2)));
        REQUIRE((argmax(m, 1).data() == IndexArray{1, 2, 1}));
        REQUIRE((argmax(m, 0).data() == IndexArray{2, 0, 1}));
        REQUIRE((argmax(Tensor({{kNaN, kNaN, 3}}), 1).data() == IndexArray{0}));
    }
    SECTION("-inf and inf are ordinary values") {
        REQUIRE(max(Tensor({-kInf, 2, kInf})).item() == kInf);
        REQUIRE((relu(Tensor({-kInf, kInf})).data() == Array{0, kInf}));
    }
}

// ==== cumsum =============================================================================================

TEST_CASE("cumsum - by hand, dims 1 and -2 against PyTorch, its reversed-sum gradient", "[ops][reduce][torch]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor y = cumsum(x, 1);
    require_values(y, {{1, 3, 6}, {4, 9, 15}});
    require_values(cumsum(x, 0), {{1, 2, 3}, {5, 7, 9}});
    weighted_sum(y, Tensor({{1, 10, 100}, {1, 1, 1}})).backward();
    require_values(x.grad(), {{111, 110, 100}, {3, 2, 1}});  // Σ of g from each position to the end
    REQUIRE(cumsum(Tensor(4.0), -1).item() == 4);              // 0-d: one element, as torch
    REQUIRE(cumsum(zeros({2, 0}), 1).shape() == Shape{2, 0});

    Tensor xr = torch_ref("cumsum.x", true);
    for (int dim : {1, -2}) {
        INFO("dim " << dim);
        xr.reset_grad();
        Tensor yr = cumsum(xr, dim);
        require_values(yr, torch_ref("cumsum.y_" + std::to_string(dim)));
        weighted_sum(yr, torch_ref("cumsum.w")).backward();
        require_values(xr.grad(), torch_ref("cumsum.dx_" + std::to_string(dim)));
    }
    REQUIRE_THROWS_WITH(cumsum(x, 2), Contains("cumsum: dim 2 out of range [-2, 2)"));
    REQUIRE_THROWS_WITH(cumsum(Tensor(1.0), 1), Contains("cumsum: dim 1 out of range [-1, 0] for a 0-d tensor"));
    CHECK(cumsum(Tensor(1.5), -1).item() == 1.5f);  // a 0-d tensor takes dim 0 or -1, as in PyTorch
}
