// tests/test_gradcheck_layers.cpp — the backward of gelu (both forms), layer_norm (fused, and
// the composed oracle) and dropout against finite differences.
//
// Built against xgrad_f64 (real = double; see core/gradcheck.hpp). Each op is checked on its
// own, so that a wrong backward cannot hide behind another op.
//
// Legend: N rows, D values per normalized row.
#include <catch2/catch.hpp>

#include <type_traits>
#include <vector>

#include "core/gradcheck.hpp"
#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== GELU ===========================================================================================

TEST_CASE("gradcheck gelu none and tanh", "[gradcheck][nn][activation][gelu]") {
    manual_seed(21);
    for (const std::string approximate : {"none", "tanh"}) {
        INFO("approximate = " << approximate);
        Tensor x = from_array(Array(3 * randn({4, 5}).data()), true);
        REQUIRE_GRADCHECK([approximate](const auto& v) { return F::gelu(v[0], approximate); }, x);
        // Both sides of the tails, the kink region around -0.75, and past |x| = 20 (tanh's cutoff).
        Tensor specific({-25, -19.5, -8, -3, -0.75, -0.1, 0, 0.1, 0.75, 3, 8, 19.5, 25}, true);
        REQUIRE_GRADCHECK([approximate](const auto& v) { return F::gelu(v[0], approximate); }, specific);
    }
}

// ==== layer norm =====================================================================================

namespace {

// x (3, 2, 5) with N(0, 1) values except one constant row x[1, 0, :] (variance 0: eps dominates).
Tensor ln_input() {
    Tensor x = randn({3, 2, 5}, true);
    for (std::size_t j = 0; j < 5; ++j) x.at({1, 0, j}) = 0.7;
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
    ln->weight.data() = randn({5}).data();
    ln->bias.data() = randn({5}).data();
    Tensor x = ln_input();
    REQUIRE_GRADCHECK([ln](const auto& v) { return ln->forward(v[0]); }, x, ln->weight, ln->bias);
}

// ==== dropout ========================================================================================

// The mask is random, so the function is reseeded before every evaluation: the finite
// differences and the backward then all see the same mask.
TEST_CASE("gradcheck dropout with a fixed mask", "[gradcheck][nn][dropout]") {
    manual_seed(27);
    Tensor x = randn({4, 7}, true);
    for (double p : {0.2, 0.5, 1.0}) {
        INFO("p = " << p);
        REQUIRE_GRADCHECK(
            [p](const auto& v) {
                manual_seed(1234);
                return F::dropout(v[0], p);
            },
            x);
    }
    // And through the module.
    auto drop = std::make_shared<nn::Dropout>(0.3);
    REQUIRE_GRADCHECK(
        [drop](const auto& v) {
            manual_seed(99);
            return drop->forward(v[0]);
        },
        x);
}
