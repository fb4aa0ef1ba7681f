// tests/nn/gradcheck_normalization.cpp — layer_norm and rms_norm (fused, and the composed
// oracles), and the LayerNorm and RMSNorm modules, against finite differences; fused equals
// composed in double; and an rms_norm whose backward drops a term, which the gradcheck must catch.
// Legend: N rows, D values per normalized row.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_normalization && build/tests/gradcheck_normalization`.
#include <catch2/catch.hpp>

#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>

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

// ==== RMS norm =======================================================================================

TEST_CASE("gradcheck rms_norm fused - with and without weight", "[gradcheck][nn][rms_norm]") {
    manual_seed(27);
    Tensor x = ln_input(), w = randn({5}, true), w2 = randn({2, 5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm(v[0], {5}, v[1]); }, x, w);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm(v[0], {2, 5}, v[1], 1e-2); }, x, w2);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm(v[0], {5}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm(v[0], {2, 5}); }, x);
    Tensor c = randn({3, 2, 5});  // x a constant: dw alone
    REQUIRE_GRADCHECK([c](const auto& v) { return F::rms_norm(c, {5}, v[0]); }, w);
}

TEST_CASE("gradcheck rms_norm composed - the oracle - and the RMSNorm module", "[gradcheck][nn][rms_norm]") {
    manual_seed(28);
    Tensor x = ln_input(), w = randn({5}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm_composed(v[0], {5}, v[1]); }, x, w);
    auto rms = std::make_shared<nn::RMSNorm>(5);
    rms->weight.mutable_data() = randn({5}).data();
    REQUIRE_GRADCHECK([rms](const auto& v) { return rms->forward(v[0]); }, x, rms->weight);
}

TEST_CASE("rms_norm fused equals composed in double - forward and gradients", "[gradcheck][nn][rms_norm]") {
    manual_seed(29);
    Tensor x = ln_input(), w = randn({2, 5}, true);
    Tensor g = randn({3, 2, 5});
    std::vector<Tensor> grads[2];
    Tensor out[2];
    for (int fused = 0; fused < 2; ++fused) {
        for (Tensor t : {x, w}) t.reset_grad();
        out[fused] = fused ? F::rms_norm(x, {2, 5}, w) : F::rms_norm_composed(x, {2, 5}, w);
        out[fused].backward(g);
        for (Tensor t : {x, w}) grads[fused].push_back(t.grad());
    }
    require_values(out[1], out[0], 1e-12);
    for (int i = 0; i < 2; ++i) require_values(grads[1][i], grads[0][i], 1e-9);
}

TEST_CASE("gradcheck catches an rms_norm backward without its mean term", "[gradcheck][nn][rms_norm][mutation]") {
    // A broken rms_norm on x (N, D): the forward is right, y = x·r·w with r = 1/√(mean(x²) + eps),
    // but its backward forgets that x moves r too: dx = r·g' instead of r·(g' - x̂·mean(g'⊙x̂)).
    auto broken = [](const Tensor& x, const Tensor& w) {
        const std::size_t N = x.shape()[0], D = x.shape()[1];
        const double eps = 1e-5;
        Array y(ArrayShape{N, D}), r(ArrayShape{N});
        for (std::size_t i = 0; i < N; ++i) {
            double ss = 0;
            for (std::size_t j = 0; j < D; ++j) ss += x.data()(i, j) * x.data()(i, j);
            r(i) = 1 / std::sqrt(ss / D + eps);
            for (std::size_t j = 0; j < D; ++j) y(i, j) = x.data()(i, j) * r(i) * w.data()(j);
        }
        return make_result(std::move(y), "broken_rms_norm", {x, w}, [x, w, r, N, D](const Array& g, const Array&) {
            Array dx(ArrayShape{N, D}), dw = xt::zeros<real>(ArrayShape{D});
            for (std::size_t i = 0; i < N; ++i)
                for (std::size_t j = 0; j < D; ++j) {
                    dx(i, j) = r(i) * g(i, j) * w.data()(j);  // the bug: no - x̂·mean(g'⊙x̂)
                    dw(j) += g(i, j) * x.data()(i, j) * r(i);
                }
            return Grads{std::move(dx), std::move(dw)};
        });
    };
    manual_seed(30);
    Tensor x = leaf({4, 5}), w = randn({5}, true);
    const GradcheckResult r = gradcheck([&](const auto& v) { return broken(v[0], v[1]); }, {x, w});
    REQUIRE_FALSE(r.ok);
    // Its dw is right: with x a constant, the broken op passes; dx is what the check caught.
    const Tensor c = randn({4, 5});
    REQUIRE(gradcheck([&](const auto& v) { return broken(c, v[0]); }, {w}).ok);
    REQUIRE_GRADCHECK([](const auto& v) { return F::rms_norm(v[0], {5}, v[1], 1e-5); }, x, w);  // the real op passes
}
