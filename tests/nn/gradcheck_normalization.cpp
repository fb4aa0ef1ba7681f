// tests/nn/gradcheck_normalization.cpp — layer_norm (fused, and the composed oracle), and the
// LayerNorm module, against finite differences; fused equals composed in double.
// Legend: N rows, D values per normalized row.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_normalization && build/tests/gradcheck_normalization`.
#include <catch2/catch.hpp>

#include <type_traits>
#include <vector>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== layer norm =====================================================================================

namespace {

// x (3, 2, 5) with N(0, 1) values except one constant row x[1, 0, :] (variance 0: eps dominates).
Tensor ln_input() {
    Tensor x = randn({3, 2, 5}, true);
    for (std::size_t j = 0; j < 5; ++j) x.mutable_data()(1, 0, j) = 0.7;
    return x;
}

}  // namespace

TEST_CASE("gradcheck layer_norm fused - x weight and bias", "[gradcheck][nn][layer_norm]") {
    manual_seed(22);
    Tensor x = ln_input(), w = randn({5}, true), b = randn({5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {5}, v[1], v[2]); }, x, w, b);
    // Two normalized dims, and a larger eps.
    Tensor w2 = randn({2, 5}, true), b2 = randn({2, 5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {2, 5}, v[1], v[2], 1e-2); }, x, w2, b2);
}

TEST_CASE("gradcheck layer_norm fused - without affine or with weight only", "[gradcheck][nn][layer_norm]") {
    manual_seed(23);
    Tensor x = ln_input();
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {5}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {2, 5}); }, x);
    Tensor w = randn({5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {5}, v[1]); }, x, w);
    Tensor b = randn({5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {5}, Tensor(), v[1]); }, x, b);
    Tensor b2 = randn({2, 5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm(v[0], {2, 5}, Tensor(), v[1]); }, x, b2);
    // Only the parameters require grad (x is a constant): dw and db alone.
    Tensor c = randn({3, 2, 5});
    REQUIRE_GRADCHECK([c](const auto& v) { return F::layer_norm(c, {5}, v[0], v[1]); }, w, b);
}

TEST_CASE("gradcheck layer_norm composed - the oracle", "[gradcheck][nn][layer_norm]") {
    manual_seed(24);
    Tensor x = ln_input(), w = randn({5}, true), b = randn({5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::layer_norm_composed(v[0], {5}, v[1], v[2]); }, x, w, b);
}

TEST_CASE("layer_norm fused equals composed in double - forward and gradients", "[gradcheck][nn][layer_norm]") {
    manual_seed(25);
    Tensor x = ln_input(), w = randn({2, 5}, true), b = randn({2, 5}, true);
    Tensor g = randn({3, 2, 5});
    std::vector<Tensor> grads[2];
    Tensor out[2];
    for (int fused = 0; fused < 2; ++fused) {
        for (Tensor t : {x, w, b}) t.reset_grad();
        out[fused] = fused ? F::layer_norm(x, {2, 5}, w, b) : F::layer_norm_composed(x, {2, 5}, w, b);
        out[fused].backward(g);
        for (Tensor t : {x, w, b}) grads[fused].push_back(t.grad());
    }
    require_values(out[1], out[0], 1e-12);
    for (int i = 0; i < 3; ++i) require_values(grads[1][i], grads[0][i], 1e-9);
}

TEST_CASE("gradcheck LayerNorm module", "[gradcheck][nn][layer_norm][module]") {
    manual_seed(26);
    auto ln = std::make_shared<nn::LayerNorm>(5);
    ln->weight.mutable_data() = randn({5}).data();
    ln->bias.mutable_data() = randn({5}).data();
    Tensor x = ln_input();
    REQUIRE_GRADCHECK([ln](const auto& v) { return ln->forward(v[0]); }, x, ln->weight, ln->bias);
}
