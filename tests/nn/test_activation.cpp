// tests/nn/test_activation.cpp — nn/activation (float32): gelu in both forms ("none", the erf
// form, and "tanh") against PyTorch and over a dense grid against double std::erfc, ±inf, NaN and a
// bad `approximate`; silu at hand-computed points, ±100, ±inf and NaN; the modules Tanh, ReLU,
// GELU, SiLU. Gradchecks: gradcheck_activation.cpp.
//
// Reference numbers were printed by tests/reference/make_layers_reference.py (torch 1.13, float64)
// and pasted here; the inputs are the closed-form expressions repeated in that script.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

// ---- the inputs of make_layers_reference.py ---------------------------------------------------------
const std::vector<double> gelu_x = {-6, -3, -1.5, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 1.5, 3, 6};

// ---- reference values: make_layers_reference.py ----------------------------------------------------
// gelu_none_y: shape (13,)
const std::vector<double> gelu_none_y = {-5.919525869e-09, -0.004049694095, -0.1002108019, -0.1586552539, -0.1542687694, -0.04601721627, 0, 0.05398278373, 0.3457312306, 0.8413447461, 1.399789198, 2.995950306, 5.999999994};

// gelu_none_dy: shape (13,)
const std::vector<double> gelu_none_dy = {-3.546870945e-08, -0.0119456472, -0.1274691922, -0.08331547059, 0.1325048753, 0.420476908, 0.5, 0.579523092, 0.8674951247, 1.083315471, 1.127469192, 1.011945647, 1.000000035};

// gelu_tanh_y: shape (13,)
const std::vector<double> gelu_tanh_y = {-8.43964898e-11, -0.003637392082, -0.100428423, -0.1588080094, -0.1542859902, -0.04601724895, 0, 0.05398275105, 0.3457140098, 0.8411919906, 1.399571577, 2.996362608, 6};

// gelu_tanh_dy: shape (13,)
const std::vector<double> gelu_tanh_dy = {-7.709976013e-10, -0.01158416663, -0.1277107932, -0.08296408385, 0.1326300965, 0.4204782107, 0.5, 0.5795217893, 0.8673699035, 1.082964084, 1.127710793, 1.011584167, 1.000000001};

}  // namespace

// =============================================================================================
// activations, Sequential
// =============================================================================================

TEST_CASE("gelu values and derivative", "[nn][activation]") {
    Tensor x({1, -1, 0, 3, -10}, true);
    Tensor y = F::gelu(x);
    // 2e-7 relative: about two float ulps, what the vectorised float Φ (nn/activation.cpp)
    // reaches at these points; "gelu: float accuracy over a dense grid" measures its error.
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

// ==== GELU ===========================================================================================

TEST_CASE("gelu none and tanh: values and derivatives equal PyTorch", "[nn][activation][gelu]") {
    for (const std::string approximate : {"none", "tanh"}) {
        INFO("approximate = " << approximate);
        Tensor x = from_values(gelu_x, {13}, true);
        Tensor y = F::gelu(x, approximate);
        y.backward(ones({13}));
        const bool exact = approximate == "none";
        require_values(y, from_values(exact ? gelu_none_y : gelu_tanh_y, {13}), 1e-6);
        require_values(x.grad(), from_values(exact ? gelu_none_dy : gelu_tanh_dy, {13}), 1e-6);
        // The module computes the same thing.
        REQUIRE(bits_equal(nn::GELU(approximate).forward(x), y));
    }
    REQUIRE(nn::GELU().approximate() == "none");
}

// The float gelu is computed with one polynomial for erfc(z)·e^(z²) and xsimd's exp
// (nn/activation.cpp); this measures it against the double std::erfc formula on 2,000,001 points
// of [-10, 10] (step 1e-5). Measured: max |error| 3.8e-7 for y and 1.8e-7 for dy/dx ("none");
// 4.3e-7 and 5.6e-7 for "tanh" against its own formula in double. Left tail: relative error of y
// at most 3.9e-6 on [-12, -3].
TEST_CASE("gelu: float accuracy over a dense grid against double std::erfc", "[nn][activation][gelu]") {
    const std::size_t n = 2000001;
    Array xs(ArrayShape{n});
    for (std::size_t i = 0; i < n; ++i) xs[i] = real(-10 + 20 * double(i) / double(n - 1));
    for (const std::string approximate : {"none", "tanh"}) {
        Tensor x = from_array(xs, true);
        Tensor y = F::gelu(x, approximate);
        y.backward(ones({n}));
        double max_y = 0, max_dy = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const double v = x.data()[i];  // the float input itself, so only the function's error counts
            double ref_y, ref_dy;
            if (approximate == "none") {
                const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
                ref_y = v * cdf;
                ref_dy = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
            } else {
                const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
                ref_y = 0.5 * v * (1 + t);
                ref_dy = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
            }
            max_y = std::max(max_y, std::fabs(y.data()[i] - ref_y));
            max_dy = std::max(max_dy, std::fabs(x.grad().data()[i] - ref_dy));
        }
        INFO("approximate = " << approximate << ": max |error| y " << max_y << ", dy/dx " << max_dy);
        CHECK(max_y < 1e-6);
        CHECK(max_dy < 1e-6);
    }
    // The left tail keeps relative accuracy: Φ(x) = ½ erfc(-x/√2), never 1 + erf(x/√2) ≈ 0.
    double max_rel = 0;
    Tensor x = from_array(Array(xt::linspace<real>(-12, -3, 9001)));
    Tensor y = F::gelu(x);
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        const double v = x.data()[i], ref = v * 0.5 * std::erfc(-v / std::sqrt(2.0));
        max_rel = std::max(max_rel, std::fabs(y.data()[i] - ref) / std::fabs(ref));
    }
    INFO("max relative error on [-12, -3]: " << max_rel);
    CHECK(max_rel < 2e-5);
}

TEST_CASE("hostile: gelu tanh with ±inf and NaN - bad approximate", "[nn][activation][gelu][hostile]") {
    // The same limits as the exact form (test_activation.cpp): 0 at -inf, x at +inf; slopes 0 and 1.
    Tensor x({kInf, -kInf, kNaN, 30, -30}, true);
    Tensor y = F::gelu(x, "tanh");
    REQUIRE(y.at({0}) == kInf);
    REQUIRE(y.at({1}) == 0);
    REQUIRE(std::isnan(y.at({2})));
    REQUIRE(y.at({3}) == 30);
    REQUIRE(y.at({4}) == 0);
    y.backward(ones({5}));
    REQUIRE(x.grad().at({0}) == 1);
    REQUIRE(x.grad().at({1}) == 0);
    REQUIRE(std::isnan(x.grad().at({2})));
    REQUIRE(x.grad().at({3}) == 1);
    REQUIRE(x.grad().at({4}) == 0);
    // Sizes that are not a multiple of the SIMD width, and empty tensors.
    for (std::int64_t n : {0, 1, 7, 9, 17}) {
        Tensor v = randn({n});
        Tensor r = F::gelu(v);
        REQUIRE(r.shape() == Shape{n});
        for (std::int64_t i = 0; i < n; ++i)
            REQUIRE(r.data()[i] == Approx(v.data()[i] * 0.5 * std::erfc(-v.data()[i] / std::sqrt(2.0))).margin(1e-6));
    }
    CHECK_THAT(message_of<ValueError>([] { F::gelu(ones({2}), "tanh "); }),
               Contains("gelu") && Contains("\"none\" or \"tanh\"") && Contains("\"tanh \""));
    CHECK_THAT(message_of<ValueError>([] { nn::GELU("exact"); }), Contains("GELU") && Contains("\"exact\""));
    CHECK_THAT(message_of<ValueError>([] { F::gelu(Tensor()); }), Contains("undefined"));
}

// ==== SiLU ===========================================================================================

// y = x σ(x), dy/dx = σ(x) (1 + x (1 - σ(x))), with σ(1) = 0.7310585786, σ(2) = 0.8807970780,
// σ(-3) = 0.0474258732:
//   x  = -3           -1             0     1             2
//   y  = -0.1422776   -0.2689414    0     0.7310586     1.7615942
//   y' = -0.0881041   0.0723295     0.5   0.9276705     1.0907842
TEST_CASE("silu by hand - values and derivative", "[nn][activation][silu]") {
    Tensor x({-3, -1, 0, 1, 2}, true);
    Tensor y = F::silu(x);
    require_values(y, Tensor({-0.14227761953, -0.26894142137, 0, 0.73105857863, 1.76159415596}), 1e-6);
    y.backward(ones({5}));
    require_values(x.grad(), Tensor({-0.08810410602, 0.07232948813, 0.5, 0.92767051187, 1.09078424878}), 1e-6);
    REQUIRE(bits_equal(nn::SiLU().forward(x), y));
    // Sizes that are not a multiple of the SIMD width, against x / (1 + e^-x) in double.
    for (std::int64_t n : {0, 1, 7, 9, 17}) {
        Tensor v = randn({n});
        Tensor r = F::silu(v);
        REQUIRE(r.shape() == Shape{n});
        for (std::int64_t i = 0; i < n; ++i)
            REQUIRE(r.data()[i] == Approx(v.data()[i] / (1 + std::exp(-double(v.data()[i])))).margin(1e-6));
    }
}

TEST_CASE("hostile: silu at ±100 - ±inf and NaN", "[nn][activation][silu][hostile]") {
    Tensor x({100, -100, kInf, -kInf, kNaN}, true);
    Tensor y = F::silu(x);
    REQUIRE(y.at({0}) == 100);
    // -100 σ(-100) = -3.72e-42; in float e^-100 is below the least normal float (e^-87.3), where
    // the vectorised exp gives 0, so y = -0 (as PyTorch's float silu); never NaN.
    REQUIRE(y.at({1}) == Approx(-3.7200759760208363e-42).margin(4e-42));
    REQUIRE(std::signbit(y.at({1})));
    REQUIRE(y.at({2}) == kInf);
    REQUIRE(y.at({3}) == 0);  // the limit x σ(x) → 0, not -inf · 0 = nan
    REQUIRE(std::isnan(y.at({4})));
    y.backward(ones({5}));
    REQUIRE(x.grad().at({0}) == 1);
    REQUIRE(x.grad().at({1}) == Approx(0).margin(1e-40));  // σ(-100)·(1 - 100) = -3.7e-42
    REQUIRE(x.grad().at({2}) == 1);
    REQUIRE(x.grad().at({3}) == 0);
    REQUIRE(std::isnan(x.grad().at({4})));
    CHECK_THAT(message_of<ValueError>([] { F::silu(Tensor()); }), Contains("silu") && Contains("undefined"));
}
