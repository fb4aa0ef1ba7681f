// tests/nn/test_normalization.cpp — nn/normalization (float32): layer_norm against PyTorch (a
// zero-variance row, with and without affine, one and two normalized dims), the fused layer_norm
// against the composed one (forward and gradients), the LayerNorm module, bad arguments, and a
// weight or bias reassigned by hand; rms_norm by hand (a 2×3 example, the default eps, a row of
// zeros), fused against composed, the RMSNorm module and its bad arguments.
// Gradchecks: gradcheck_normalization.cpp.
//
// Reference numbers were printed by tests/reference/make_layers_reference.py (torch 1.13, float64).
// Legend: N rows, D values per normalized row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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

// x (2, 3, 4): 2 sin(0.7 i + 0.3) + 0.1 i over the flat index i; the row x[1, 2, :] is 0.7 (variance 0).
Tensor ln_x(bool requires_grad) {
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = 2 * std::sin(0.7 * i + 0.3) + 0.1 * i;
    for (int j = 20; j < 24; ++j) v[j] = 0.7;
    return from_values(v, {2, 3, 4}, requires_grad);
}

// weight[j] = 1 + 0.1 cos(j), bias[j] = 0.05 j - 0.1;  g[i] = cos(0.37 i), the upstream gradient.
Tensor ln_weight(const Shape& s) {
    std::vector<double> v;
    for (int j = 0; j < 4; ++j) v.push_back(1 + 0.1 * std::cos(j));
    return from_values(v, s, true);
}

Tensor ln_bias(const Shape& s) {
    std::vector<double> v;
    for (int j = 0; j < 4; ++j) v.push_back(0.05 * j - 0.1);
    return from_values(v, s, true);
}

Tensor ln_g() {
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = std::cos(0.37 * i);
    return from_values(v, {2, 3, 4});
}

// ln4_y: shape (2, 3, 4)
const std::vector<double> ln4_y = {-1.896393475, 0.3635429143, 1.02809217, 0.2013743277, 1.70548709, -0.1374733178, -0.9440391882, -0.4665721822, -1.764998945, -0.3318883791, 0.7000709404, 0.9965957397, 1.468003035, 0.3714855657, -0.6191306528, -1.012570843, -1.543547926, -0.5973818327, 0.4880211403, 1.241507876, -0.1, -0.05, 2.884444412e-15, 0.05};

// ln4_dx: shape (2, 3, 4)
const std::vector<double> ln4_dx = {0.1082002638, 0.4116521565, 0.113294866, -0.6331472863, -0.01096061053, 0.1696835945, 0.1430504715, -0.3017734554, 0.05995200226, -0.09956561442, -0.07029556351, 0.1099091757, -0.00566194541, 0.01791524132, -0.02541358079, 0.01316028488, -0.04679348779, 0.05000469275, 0.03835963214, -0.0415708371, 172.2464954, 47.6568995, -65.8084105, -154.0949844};

// ln4_dw: shape (4,)
const std::vector<double> ln4_dw = {-1.605722838, 0.1710305709, 0.9504638408, 0.02775966491};

// ln4_db: shape (4,)
const std::vector<double> ln4_db = {1.211398512, 0.8557491407, 0.3842781377, -0.1392031085};

// ln34_y: shape (2, 3, 4)
const std::vector<double> ln34_y = {-0.2245933098, 0.6189445297, 0.9023086487, 0.5255138595, -0.3009419753, -1.155078378, -1.601896266, -1.39796482, -0.6059108, 0.4350357976, 1.268586908, 1.535995805, 1.23587082, 0.2121362824, -0.8318786986, -1.364229017, -1.093613454, -0.1063781909, 1.174093149, 2.186503433, -0.353126081, -0.353126081, -0.353126081, -0.353126081};

// ln34_dx: shape (2, 3, 4)
const std::vector<double> ln34_dx = {0.8469044804, 0.7057275945, 0.5371929526, 0.370926682, 0.211793659, 0.04703653408, -0.1363662165, -0.3338242368, -0.5147391771, -0.6289659171, -0.626165555, -0.4795208, -0.542198071, -0.2234359141, 0.08384427367, 0.338118367, 0.5050079332, 0.5619170041, 0.5010951325, 0.3307099066, 0.07330009603, -0.2353415203, -0.5538630654, -0.8391541424};

}  // namespace

// ==== layer norm =====================================================================================

TEST_CASE("layer_norm equals PyTorch - normalized_shape (4) with affine and a zero-variance row", "[nn][layer_norm]") {
    Tensor x = ln_x(true), w = ln_weight({4}), b = ln_bias({4});
    Tensor y = F::layer_norm(x, {4}, w, b);
    require_values(y, from_values(ln4_y, {2, 3, 4}), 1e-5);
    // The constant row: var = 0 exactly, x̂ = 0, so y is the bias to the last bit.
    for (std::int64_t j = 0; j < 4; ++j) REQUIRE(y.at({1, 2, j}) == b.at({j}));
    y.backward(ln_g());
    require_values(x.grad(), from_values(ln4_dx, {2, 3, 4}), 1e-5);
    require_values(w.grad(), from_values(ln4_dw, {4}), 1e-5);
    require_values(b.grad(), from_values(ln4_db, {4}), 1e-5);
}

TEST_CASE("layer_norm equals PyTorch - normalized_shape (3 4) without affine and eps 1e-3", "[nn][layer_norm]") {
    Tensor x = ln_x(true);
    Tensor y = F::layer_norm(x, {3, 4}, Tensor(), Tensor(), 1e-3);
    require_values(y, from_values(ln34_y, {2, 3, 4}), 1e-5);
    y.backward(ln_g());
    require_values(x.grad(), from_values(ln34_dx, {2, 3, 4}), 1e-5);
}

TEST_CASE("layer_norm: fused equals composed - forward and gradients", "[nn][layer_norm]") {
    manual_seed(3);
    struct Case {
        Shape x, normalized;
        bool weight, bias;
    };
    // D = 45: the backward's dw, db take one group of four column registers, one register, a 5-value tail
    for (const Case& c : {Case{{4, 5, 16}, {16}, true, true}, Case{{3, 4, 6}, {4, 6}, true, false},
                          Case{{7, 8}, {8}, false, false}, Case{{8}, {8}, false, true},
                          Case{{6, 3, 45}, {45}, true, true}, Case{{5, 45}, {45}, false, true}}) {
        INFO("x " << shape_str(c.x) << ", normalized_shape " << shape_str(c.normalized));
        Tensor x = from_array(Array(3 * randn(c.x).data() + 1), true);
        Tensor w = c.weight ? randn(c.normalized, true) : Tensor();
        Tensor b = c.bias ? randn(c.normalized, true) : Tensor();
        Tensor g = randn(c.x);
        std::vector<Tensor> grads[2];
        Tensor out[2];
        for (int fused = 0; fused < 2; ++fused) {
            for (Tensor t : {x, w, b})
                if (t.defined()) t.reset_grad();
            out[fused] = fused ? F::layer_norm(x, c.normalized, w, b) : F::layer_norm_composed(x, c.normalized, w, b);
            out[fused].backward(g);
            for (Tensor t : {x, w, b})
                if (t.defined()) grads[fused].push_back(t.grad());
        }
        require_values(out[1], out[0], 1e-5);
        for (std::size_t i = 0; i < grads[0].size(); ++i) require_values(grads[1][i], grads[0][i], 1e-4);
    }
}

TEST_CASE("LayerNorm module: parameters - initialisation - forward", "[nn][layer_norm][module]") {
    nn::LayerNorm ln(4);
    const auto named = ln.named_parameters();
    REQUIRE(named.size() == 2);
    REQUIRE(named[0].first == "weight");
    REQUIRE(named[1].first == "bias");
    require_values(ln.weight, ones({4}), 0);
    require_values(ln.bias, zeros({4}), 0);
    Tensor x = ln_x(false);
    ln.weight.mutable_data() = ln_weight({4}).data();
    ln.bias.mutable_data() = ln_bias({4}).data();
    require_values(ln.forward(x), from_values(ln4_y, {2, 3, 4}), 1e-5);

    nn::LayerNorm plain(4, 1e-5, /*elementwise_affine=*/false);
    REQUIRE(plain.num_parameters() == 0);
    REQUIRE(!plain.weight.defined());
    REQUIRE(bits_equal(plain.forward(x), F::layer_norm(x, {4})));
    nn::LayerNorm no_bias(4, 1e-5, true, /*bias=*/false);
    REQUIRE(no_bias.num_parameters() == 4);
    REQUIRE(!no_bias.bias.defined());
}

TEST_CASE("hostile: layer_norm with mismatched shapes or a bad eps", "[nn][layer_norm][hostile]") {
    Tensor x = randn({2, 3, 4});
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {3}); }),
               Contains("layer_norm") && Contains("normalized_shape (3)") && Contains("(2, 3, 4)"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {2, 3, 4, 1}); }), Contains("trailing dims"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {}); }), Contains("at least one dim"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {4}, ones({3})); }),
               Contains("weight of shape (3)") && Contains("(4)"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {3, 4}, ones({4})); }), Contains("weight of shape (4)"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {4}, ones({4}), zeros({4, 1})); }),
               Contains("bias of shape (4, 1)"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {4}, Tensor(), Tensor(), -1e-5); }),
               Contains("eps must be >= 0") && Contains("-1e-05"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(x, {4}, Tensor(), Tensor(), std::nan("")); }),
               Contains("eps must be >= 0"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm_composed(x, {3}); }), Contains("layer_norm_composed"));
    CHECK_THAT(message_of<ValueError>([&] { F::layer_norm(Tensor(), {4}); }), Contains("undefined"));
    CHECK_THAT(message_of<ValueError>([] { nn::LayerNorm(0); }), Contains("LayerNorm") && Contains("got 0"));
    CHECK_THAT(message_of<ValueError>([] { nn::LayerNorm(4, -1); }), Contains("eps"));
    CHECK_THAT(message_of<ValueError>([&] { nn::LayerNorm(5).forward(x); }), Contains("normalized_shape (5)"));
    // An empty batch is fine: no rows, an empty result.
    REQUIRE(F::layer_norm(zeros({0, 4}), {4}).shape() == Shape{0, 4});
}

// LayerNorm's weight and bias are public members, as Linear's. Linear and Embedding refuse a
// forward after `weight` was reassigned (the optimizer and state_dict() hold the registered
// tensor); LayerNorm read the new tensor silently, so training stepped a tensor the forward no
// longer read, and save() wrote the stale one.
TEST_CASE("hostile: LayerNorm refuses a reassigned weight or bias", "[hostile][regression]") {
    nn::LayerNorm ln(3);
    const Tensor x({{1, 2, 4}});
    ln.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { ln.forward(x); }), Contains("LayerNorm") && Contains("weight"));
    nn::LayerNorm ln2(3);
    ln2.bias = Tensor({1, 1, 1}, true);
    CHECK_THAT(message_of<ValueError>([&] { ln2.forward(x); }), Contains("LayerNorm") && Contains("bias"));
    // Without affine parameters there is nothing to reassign; a defined member is refused too.
    nn::LayerNorm plain(3, 1e-5, /*elementwise_affine=*/false);
    require_values(plain.forward(Tensor({{1, 1, 1}})), Tensor({{0, 0, 0}}));
    plain.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { plain.forward(x); }), Contains("LayerNorm"));
    // Values changed in place are fine: the registered tensor is still the one read.
    nn::LayerNorm ln3(3);
    ln3.weight.mutable_data().fill(2);
    const Tensor y = ln3.forward(Tensor({{1, 2, 3}}));
    require_values(y, Tensor({{-2.4494714, 0, 2.4494714}}), 1e-5);
}

// ==== RMS norm =======================================================================================

namespace {

// Runs f (fused or composed rms_norm) on x, w, backward with g, and returns y, dx and dw (if w).
std::vector<Tensor> rms_outputs(bool fused, Tensor x, Tensor w, const Shape& normalized, const Tensor& g) {
    for (Tensor t : {x, w})
        if (t.defined()) t.reset_grad();
    Tensor y = fused ? F::rms_norm(x, normalized, w) : F::rms_norm_composed(x, normalized, w);
    y.backward(g);
    std::vector<Tensor> out{y, x.grad()};
    if (w.defined()) out.push_back(w.grad());
    return out;
}

}  // namespace

// x = [[1, 2, 2], [2, -2, 4]], normalized_shape (3), weight w = [1, 2, -1], eps = 1 (round numbers):
//   row 0: mean(x²) = (1 + 4 + 4)/3 = 3,   r = 1/√(3 + 1) = 1/2,  x̂ = [1/2, 1, 1]
//   row 1: mean(x²) = (4 + 4 + 16)/3 = 8,  r = 1/√(8 + 1) = 1/3,  x̂ = [2/3, -2/3, 4/3]
//   y = x̂ ⊙ w = [[1/2, 2, -1], [2/3, -4/3, -4/3]]
// g = [[1, 0, 0], [0, 0, 1]]; g' = g ⊙ w; dx = r (g' - x̂ mean(g' ⊙ x̂)), dw = Σ_rows g ⊙ x̂:
//   row 0: g' = [1, 0, 0],  mean(g' ⊙ x̂) = (1/2)/3 = 1/6,   dx = ½ ([1, 0, 0] - x̂/6) = [11/24, -1/12, -1/12]
//   row 1: g' = [0, 0, -1], mean(g' ⊙ x̂) = (-4/3)/3 = -4/9, dx = ⅓ ([0, 0, -1] + 4x̂/9) = [8/81, -8/81, -11/81]
//   dw = [1/2, 0, 0] + [0, 0, 4/3] = [1/2, 0, 4/3]
TEST_CASE("rms_norm by hand - a 2x3 example with weight and eps 1", "[nn][rms_norm]") {
    Tensor x({{1, 2, 2}, {2, -2, 4}}, true);
    Tensor w({1, 2, -1}, true);
    Tensor y = F::rms_norm(x, {3}, w, 1.0);
    require_values(y, Tensor({{0.5, 2, -1}, {2.0 / 3, -4.0 / 3, -4.0 / 3}}), 1e-6);
    y.backward(Tensor({{1, 0, 0}, {0, 0, 1}}));
    require_values(x.grad(), Tensor({{11.0 / 24, -1.0 / 12, -1.0 / 12}, {8.0 / 81, -8.0 / 81, -11.0 / 81}}), 1e-6);
    require_values(w.grad(), Tensor({0.5, 0, 4.0 / 3}), 1e-6);
}

TEST_CASE("rms_norm: eps nullopt is the dtype's machine epsilon", "[nn][rms_norm]") {
    // x = [1e-4, -1e-4]: mean(x²) = 1e-8, so eps shows: 1e-4 / √(1e-8 + 1.1920929e-7) = 0.2781974
    // (with PyTorch LayerNorm's 1e-5 it would be 0.0316).
    Tensor x({1e-4, -1e-4});
    require_values(F::rms_norm(x, {2}), Tensor({0.27819744, -0.27819744}), 1e-5);
    require_values(F::rms_norm_composed(x, {2}), Tensor({0.27819744, -0.27819744}), 1e-5);
    require_values(nn::RMSNorm(2).forward(x), Tensor({0.27819744, -0.27819744}), 1e-5);
    // Far above eps the rows are x / rms(x): [1, 2, 2] / √3.
    require_values(F::rms_norm(Tensor({1, 2, 2}), {3}), Tensor({0.57735027, 1.15470054, 1.15470054}), 1e-6);
}

TEST_CASE("rms_norm: a row of zeros gives 0 - not NaN", "[nn][rms_norm]") {
    Tensor x({{0, 0, 0, 0}, {1, -1, 1, -1}}, true);
    Tensor w({1, 2, 3, 4}, true);
    for (bool fused : {true, false}) {
        INFO("fused = " << fused);
        x.reset_grad();
        w.reset_grad();
        Tensor y = fused ? F::rms_norm(x, {4}, w) : F::rms_norm_composed(x, {4}, w);
        require_values(y, Tensor({{0, 0, 0, 0}, {1, -2, 3, -4}}), 1e-6);
        y.backward(ones({2, 4}));
        // Row 0: x̂ = 0, so dx = r·g' = w / √eps, finite; dw gets nothing from it.
        REQUIRE(all_finite(x.grad()));
        REQUIRE(x.grad().at({0, 3}) == Approx(4 / std::sqrt(1.1920929e-7)).epsilon(1e-5));
        require_values(w.grad(), Tensor({1, -1, 1, -1}), 1e-6);
    }
}

TEST_CASE("rms_norm: fused equals composed - forward and gradients", "[nn][rms_norm]") {
    manual_seed(7);
    struct Case {
        Shape x, normalized;
        bool weight;
    };
    for (const Case& c : {Case{{4, 5, 16}, {16}, true}, Case{{3, 4, 6}, {4, 6}, true}, Case{{7, 8}, {8}, false},
                          Case{{3, 4, 6}, {4, 6}, false}, Case{{8}, {8}, true}, Case{{6, 45}, {45}, true}}) {
        INFO("x " << shape_str(c.x) << ", normalized_shape " << shape_str(c.normalized) << ", weight " << c.weight);
        Tensor x = from_array(Array(randn(c.x).data() + real(0.5)), true);
        Tensor w = c.weight ? randn(c.normalized, true) : Tensor();
        Tensor g = randn(c.x);
        const std::vector<Tensor> composed = rms_outputs(false, x, w, c.normalized, g);
        const std::vector<Tensor> fused = rms_outputs(true, x, w, c.normalized, g);
        REQUIRE(fused.size() == composed.size());
        for (std::size_t i = 0; i < fused.size(); ++i) require_values(fused[i], composed[i], 1e-6);
    }
}

TEST_CASE("RMSNorm module: parameters - initialisation - forward", "[nn][rms_norm][module]") {
    nn::RMSNorm rms(3, 1.0);
    const auto named = rms.named_parameters();
    REQUIRE(named.size() == 1);
    REQUIRE(named[0].first == "weight");
    require_values(rms.weight, ones({3}), 0);
    rms.weight.mutable_data() = Tensor({1, 2, -1}).data();
    require_values(rms.forward(Tensor({{1, 2, 2}, {2, -2, 4}})), Tensor({{0.5, 2, -1}, {2.0 / 3, -4.0 / 3, -4.0 / 3}}), 1e-6);

    nn::RMSNorm plain(3, std::nullopt, /*elementwise_affine=*/false);
    REQUIRE(plain.num_parameters() == 0);
    REQUIRE(!plain.weight.defined());
    const Tensor x = randn({2, 5, 3});
    REQUIRE(bits_equal(plain.forward(x), F::rms_norm(x, {3})));
    // A reassigned weight is refused, as LayerNorm's.
    rms.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { rms.forward(x); }), Contains("RMSNorm") && Contains("weight"));
    plain.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { plain.forward(x); }), Contains("RMSNorm"));
}

TEST_CASE("hostile: rms_norm with mismatched shapes or a bad eps", "[nn][rms_norm][hostile]") {
    Tensor x = randn({2, 3, 4});
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(x, {3}); }),
               Contains("rms_norm") && Contains("normalized_shape (3)") && Contains("(2, 3, 4)"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(x, {}); }), Contains("at least one dim"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(x, {4}, ones({3})); }),
               Contains("rms_norm") && Contains("weight of shape (3)") && Contains("(4)"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(x, {4}, Tensor(), -1e-5); }),
               Contains("eps must be >= 0") && Contains("-1e-05"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(x, {4}, Tensor(), std::nan("")); }), Contains("eps must be >= 0"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm_composed(x, {3}); }), Contains("rms_norm_composed"));
    CHECK_THAT(message_of<ValueError>([&] { F::rms_norm(Tensor(), {4}); }), Contains("rms_norm") && Contains("undefined"));
    CHECK_THAT(message_of<ValueError>([] { nn::RMSNorm(0); }), Contains("RMSNorm") && Contains("got 0"));
    CHECK_THAT(message_of<ValueError>([] { nn::RMSNorm(4, -1.0); }), Contains("RMSNorm") && Contains("eps"));
    CHECK_THAT(message_of<ValueError>([&] { nn::RMSNorm(5).forward(x); }), Contains("normalized_shape (5)"));
    REQUIRE(F::rms_norm(zeros({0, 4}), {4}).shape() == Shape{0, 4});
}
