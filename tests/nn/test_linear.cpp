// tests/nn/test_linear.cpp — nn::Linear and functional::linear: y = x Wᵀ + b on hand numbers,
// the initialisation's bounds, no bias, wrong sizes and empty batches.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

// =============================================================================================
// Linear
// =============================================================================================

TEST_CASE("Linear forward y = x Wᵀ + b on hand numbers", "[nn][linear]") {
    nn::Linear fc(3, 2);
    REQUIRE(fc.in_features() == 3);
    REQUIRE(fc.out_features() == 2);
    fc.weight.mutable_data() = Tensor({{1, 2, 3}, {4, 5, 6}}).data();
    fc.bias.mutable_data() = Tensor({0.5, -1}).data();
    Tensor x({{1, 0, -1}, {2, 1, 0}});
    // [1 - 3 + 0.5, 4 - 6 - 1] and [2 + 2 + 0.5, 8 + 5 - 1]
    require_values(fc.forward(x), {{-1.5, -3}, {4.5, 12}}, 0);
    // A single vector (in,) → (out,).
    require_values(fc.forward(Tensor({1, 1, 1})), {6.5, 14}, 0);
    // (B, T, in) → (B, T, out): every row as above.
    Tensor x3({{{1, 0, -1}, {2, 1, 0}}, {{0, 0, 0}, {1, 1, 1}}});
    require_values(fc.forward(x3), {{{-1.5, -3}, {4.5, 12}}, {{0.5, -1}, {6.5, 14}}}, 0);

    // Backward: dX = G W, dW = Gᵀ X, db = Σ G.
    Tensor xg({{1, 0, -1}, {2, 1, 0}}, true);
    weighted_sum(fc.forward(xg), Tensor({{1, 0}, {0, 1}})).backward();
    require_values(xg.grad(), {{1, 2, 3}, {4, 5, 6}}, 0);
    require_values(fc.weight.grad(), {{1, 0, -1}, {2, 1, 0}}, 0);
    require_values(fc.bias.grad(), {1, 1}, 0);
}

// y starts as b and gemm adds X·Wᵀ (beta = 1): over a K long enough that OpenBLAS sums it in
// several blocks, y is still x·Wᵀ + b.
TEST_CASE("linear with bias equals matmul then + b - long K", "[nn][linear]") {
    manual_seed(5);
    const Tensor x = randn({70, 600}), w = randn({40, 600}), b = randn({40});
    require_values(F::linear(x, w, b), matmul(x, transpose(w, 0, 1)) + b, 1e-5);
    // without a bias and with in = 0, y is exact zeros (gemm's beta = 0 on an empty sum)
    require_values(F::linear(zeros({3, 0}), zeros({2, 0})), zeros({3, 2}), 0);
}

TEST_CASE("Linear init is U(-1/√in 1/√in) - spread over the whole interval", "[nn][linear]") {
    manual_seed(9);
    nn::Linear fc(400, 300);
    const double k = 1 / std::sqrt(400.0);  // 0.05
    double s = 0, s2 = 0;
    real lo = 1, hi = -1;
    for (real v : fc.weight.data()) {
        s += v;
        s2 += double(v) * v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    const double n = 120000;
    REQUIRE(lo >= -k);
    REQUIRE(hi <= k);
    REQUIRE(lo < -0.99 * k);
    REQUIRE(hi > 0.99 * k);
    REQUIRE(std::abs(s / n) < 0.001);
    REQUIRE(std::sqrt(s2 / n) == Approx(k / std::sqrt(3.0)).epsilon(0.02));  // U(-k, k) has std k/√3
    for (real v : fc.bias.data()) REQUIRE(std::abs(v) <= k);
    REQUIRE(*std::min_element(fc.bias.data().begin(), fc.bias.data().end()) < -0.8 * k);
    REQUIRE(*std::max_element(fc.bias.data().begin(), fc.bias.data().end()) > 0.8 * k);
}

TEST_CASE("Linear without bias", "[nn][linear]") {
    nn::Linear fc(3, 2, /*bias=*/false);
    REQUIRE_FALSE(fc.bias.defined());
    REQUIRE(fc.named_parameters().size() == 1);
    REQUIRE(fc.num_parameters() == 6);
    fc.weight.mutable_data() = Tensor({{1, 2, 3}, {4, 5, 6}}).data();
    require_values(fc.forward(Tensor({{1, 0, -1}})), {{-2, -2}}, 0);
}

TEST_CASE("hostile: Linear: wrong input sizes - empty batches", "[nn][linear][hostile][regression]") {
    nn::Linear fc(3, 2);
    CHECK_THAT(message_of<ValueError>([&] { fc.forward(ones({2, 4})); }),
               Contains("linear") && Contains("(2, 4)") && Contains("in_features = 3"));
    CHECK_THAT(message_of<ValueError>([&] { fc.forward(Tensor(1.0)); }), Contains("in_features = 3"));
    CHECK_THAT(message_of<ValueError>([&] { F::linear(ones({2, 3}), ones({3})); }),
               Contains("weight must be (out, in)"));
    CHECK_THAT(message_of<ValueError>([&] { F::linear(ones({2, 3}), ones({2, 3}), ones({3})); }),
               Contains("bias of shape (3) does not match (2,)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Linear(0, 2); }), Contains("Linear") && Contains("(0, 2)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Linear(std::int64_t(1) << 33, std::int64_t(1) << 31); }),
               Contains("Linear") && Contains("too large"));

    // An empty batch (0, in) → (0, out); its gradients are exact zeros, not uninitialised memory.
    Tensor x = zeros({0, 3}, true);
    Tensor y = fc.forward(x);
    REQUIRE(y.shape() == Shape{0, 2});
    y.sum().backward();
    REQUIRE(x.grad().shape() == Shape{0, 3});
    require_values(fc.weight.grad(), zeros({2, 3}), 0);
    require_values(fc.bias.grad(), zeros({2}), 0);
    REQUIRE(fc.forward(zeros({2, 0, 3})).shape() == Shape{2, 0, 2});

    // in = 0 (functional only): y is the bias, repeated; dW is (out, 0).
    Tensor w0 = zeros({2, 0}, true), b0({7, 8}, true);
    Tensor y0 = F::linear(zeros({3, 0}), w0, b0);
    require_values(y0, {{7, 8}, {7, 8}, {7, 8}}, 0);
    y0.sum().backward();
    require_values(b0.grad(), {3, 3}, 0);
}
