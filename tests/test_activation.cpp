// tests/test_activation.cpp — gelu (both forms) and the activation modules Tanh, ReLU, GELU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

// =============================================================================================
// activations, Sequential
// =============================================================================================

TEST_CASE("gelu values and derivative", "[nn][activation]") {
    Tensor x({1, -1, 0, 3, -10}, true);
    Tensor y = F::gelu(x);
    // 2e-7 relative: about two float ulps, what the vectorised float Φ (nn/activation.cpp)
    // reaches at these points; test_layers.cpp measures its error over a dense grid.
    REQUIRE(y.at({0}) == Approx(0.8413447460685429).epsilon(2e-7));
    REQUIRE(y.at({1}) == Approx(-0.15865525393145707).epsilon(2e-7));
    REQUIRE(y.at({2}) == 0);
    REQUIRE(y.at({3}) == Approx(3 * 0.9986501019683699).epsilon(2e-7));
    // Far in the left tail: -10 Φ(-10) = -7.62e-23, not 0 (1 + erf(x/√2) cancels to 0 there).
    REQUIRE(y.at({4}) == Approx(-7.61985302416047e-23).epsilon(1e-5));
    // dy/dx = Φ(x) + x φ(x): at 0, 1/2; at 1, 0.8413447 + 0.2419707 = 1.0833155.
    y.backward(ones({5}));
    REQUIRE(x.grad().at({2}) == Approx(0.5));
    REQUIRE(x.grad().at({0}) == Approx(0.8413447460685429 + 0.24197072451914337).epsilon(1e-6));
}

TEST_CASE("hostile: gelu with ±inf and NaN", "[nn][activation][hostile][regression]") {
    Tensor x({kInf, -kInf, kNaN}, true);
    Tensor y = F::gelu(x);
    REQUIRE(y.at({0}) == kInf);
    REQUIRE(y.at({1}) == 0);  // the limit x Φ(x) → 0, not -inf · 0 = nan
    REQUIRE(std::isnan(y.at({2})));
    y.backward(ones({3}));
    REQUIRE(x.grad().at({0}) == 1);
    REQUIRE(x.grad().at({1}) == 0);
    REQUIRE(std::isnan(x.grad().at({2})));
}

TEST_CASE("activation modules: Tanh - ReLU - GELU", "[nn][activation]") {
    Tensor x({-2, 0, 0.5});
    nn::Tanh tanh_m;
    nn::ReLU relu_m;
    nn::GELU gelu_m;
    require_values(tanh_m.forward(x), {real(std::tanh(-2.0)), 0, real(std::tanh(0.5))}, 1e-6);
    require_values(relu_m.forward(x), {0, 0, 0.5}, 0);
    require_values(gelu_m.forward(x), {real(-2 * 0.5 * std::erfc(2 / std::sqrt(2.0))), 0,
                                       real(0.5 * 0.5 * std::erfc(-0.5 / std::sqrt(2.0)))},
                   1e-6);
    REQUIRE(tanh_m.num_parameters() == 0);
    REQUIRE(relu_m.named_parameters().empty());
    REQUIRE(gelu_m.num_parameters() == 0);
}
