// tests/test_layers.cpp — value tests for GELU (both forms), layer norm, dropout and ModuleList
// (float32 build).
//
// Covers: gelu "none" and "tanh" against PyTorch, the float gelu's accuracy over a dense grid
// against double std::erfc, bad `approximate` strings; layer_norm against PyTorch (a
// zero-variance row included, with and without affine, one and two normalized dims), the fused
// layer_norm against the composed one (forward and gradients), the LayerNorm module, bad
// arguments; dropout's statistics, exact scale, mask reuse in the backward, reproducibility
// under manual_seed, train()/eval(), p = 0 and p = 1, bad p; ModuleList's names, indexing and order.
// The finite-difference checks of the three ops are in test_gradcheck_layers.cpp (double).
//
// Reference numbers marked "make_layers_reference.py" were printed by
//     /usr/bin/python3 tests/reference/make_layers_reference.py      (torch 1.13, float64)
// and pasted here; the inputs are the closed-form expressions repeated in that script.
//
// Legend: N rows, D values per normalized row, d width.
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

#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::message_of;
using xgrad::testing::require_values;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

constexpr real kInf = std::numeric_limits<real>::infinity();
constexpr real kNaN = std::numeric_limits<real>::quiet_NaN();

Tensor tensor_of(const std::vector<double>& v, const Shape& shape, bool requires_grad = false) {
    Array a(shape);
    REQUIRE(a.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i) a.data()[i] = real(v[i]);
    return from_array(std::move(a), requires_grad);
}

bool bits_equal(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data().data(), b.data().data(), a.numel() * sizeof(real)) == 0;
}

// ---- the inputs of make_layers_reference.py ---------------------------------------------------------
const std::vector<double> gelu_x = {-6, -3, -1.5, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 1.5, 3, 6};

// x (2, 3, 4): 2 sin(0.7 i + 0.3) + 0.1 i over the flat index i; the row x[1, 2, :] is 0.7 (variance 0).
Tensor ln_x(bool requires_grad) {
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = 2 * std::sin(0.7 * i + 0.3) + 0.1 * i;
    for (int j = 20; j < 24; ++j) v[j] = 0.7;
    return tensor_of(v, {2, 3, 4}, requires_grad);
}
// weight[j] = 1 + 0.1 cos(j), bias[j] = 0.05 j - 0.1;  g[i] = cos(0.37 i), the upstream gradient.
Tensor ln_weight(const Shape& s) {
    std::vector<double> v;
    for (int j = 0; j < 4; ++j) v.push_back(1 + 0.1 * std::cos(j));
    return tensor_of(v, s, true);
}
Tensor ln_bias(const Shape& s) {
    std::vector<double> v;
    for (int j = 0; j < 4; ++j) v.push_back(0.05 * j - 0.1);
    return tensor_of(v, s, true);
}
Tensor ln_g() {
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i) v[i] = std::cos(0.37 * i);
    return tensor_of(v, {2, 3, 4});
}

// ---- reference values: make_layers_reference.py ----------------------------------------------------
// gelu_none_y: shape (13,)
const std::vector<double> gelu_none_y = {-5.919525869e-09, -0.004049694095, -0.1002108019, -0.1586552539, -0.1542687694, -0.04601721627, 0, 0.05398278373, 0.3457312306, 0.8413447461, 1.399789198, 2.995950306, 5.999999994};
// gelu_none_dy: shape (13,)
const std::vector<double> gelu_none_dy = {-3.546870945e-08, -0.0119456472, -0.1274691922, -0.08331547059, 0.1325048753, 0.420476908, 0.5, 0.579523092, 0.8674951247, 1.083315471, 1.127469192, 1.011945647, 1.000000035};
// gelu_tanh_y: shape (13,)
const std::vector<double> gelu_tanh_y = {-8.43964898e-11, -0.003637392082, -0.100428423, -0.1588080094, -0.1542859902, -0.04601724895, 0, 0.05398275105, 0.3457140098, 0.8411919906, 1.399571577, 2.996362608, 6};
// gelu_tanh_dy: shape (13,)
const std::vector<double> gelu_tanh_dy = {-7.709976013e-10, -0.01158416663, -0.1277107932, -0.08296408385, 0.1326300965, 0.4204782107, 0.5, 0.5795217893, 0.8673699035, 1.082964084, 1.127710793, 1.011584167, 1.000000001};
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

// ==== GELU ===========================================================================================

TEST_CASE("gelu none and tanh: values and derivatives equal PyTorch", "[nn][activation][gelu]") {
    for (const std::string approximate : {"none", "tanh"}) {
        INFO("approximate = " << approximate);
        Tensor x = tensor_of(gelu_x, {13}, true);
        Tensor y = F::gelu(x, approximate);
        y.backward(ones({13}));
        const bool exact = approximate == "none";
        require_values(y, tensor_of(exact ? gelu_none_y : gelu_tanh_y, {13}), 1e-6);
        require_values(x.grad(), tensor_of(exact ? gelu_none_dy : gelu_tanh_dy, {13}), 1e-6);
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
    Array xs(Shape{n});
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
    for (std::size_t i = 0; i < x.numel(); ++i) {
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
    for (std::size_t n : {0, 1, 7, 9, 17}) {
        Tensor v = randn({n});
        Tensor r = F::gelu(v);
        REQUIRE(r.shape() == Shape{n});
        for (std::size_t i = 0; i < n; ++i)
            REQUIRE(r.data()[i] == Approx(v.data()[i] * 0.5 * std::erfc(-v.data()[i] / std::sqrt(2.0))).margin(1e-6));
    }
    CHECK_THAT(message_of<ValueError>([] { F::gelu(ones({2}), "tanh "); }),
               Contains("gelu") && Contains("\"none\" or \"tanh\"") && Contains("\"tanh \""));
    CHECK_THAT(message_of<ValueError>([] { nn::GELU("exact"); }), Contains("GELU") && Contains("\"exact\""));
    CHECK_THAT(message_of<ValueError>([] { F::gelu(Tensor()); }), Contains("undefined"));
}

// ==== layer norm =====================================================================================

TEST_CASE("layer_norm equals PyTorch - normalized_shape (4) with affine and a zero-variance row", "[nn][layer_norm]") {
    Tensor x = ln_x(true), w = ln_weight({4}), b = ln_bias({4});
    Tensor y = F::layer_norm(x, {4}, w, b);
    require_values(y, tensor_of(ln4_y, {2, 3, 4}), 1e-5);
    // The constant row: var = 0 exactly, x̂ = 0, so y is the bias to the last bit.
    // (Read through const handles: a non-const at() counts as an in-place change of b, an input
    // of the backward below.)
    for (std::size_t j = 0; j < 4; ++j) REQUIRE(std::as_const(y).at({1, 2, j}) == std::as_const(b).at({j}));
    y.backward(ln_g());
    require_values(x.grad(), tensor_of(ln4_dx, {2, 3, 4}), 1e-5);
    require_values(w.grad(), tensor_of(ln4_dw, {4}), 1e-5);
    require_values(b.grad(), tensor_of(ln4_db, {4}), 1e-5);
}

TEST_CASE("layer_norm equals PyTorch - normalized_shape (3 4) without affine and eps 1e-3", "[nn][layer_norm]") {
    Tensor x = ln_x(true);
    Tensor y = F::layer_norm(x, {3, 4}, Tensor(), Tensor(), 1e-3);
    require_values(y, tensor_of(ln34_y, {2, 3, 4}), 1e-5);
    y.backward(ln_g());
    require_values(x.grad(), tensor_of(ln34_dx, {2, 3, 4}), 1e-5);
}

TEST_CASE("layer_norm: fused equals composed - forward and gradients", "[nn][layer_norm]") {
    manual_seed(3);
    struct Case {
        Shape x, normalized;
        bool weight, bias;
    };
    for (const Case& c : {Case{{4, 5, 16}, {16}, true, true}, Case{{3, 4, 6}, {4, 6}, true, false},
                          Case{{7, 8}, {8}, false, false}, Case{{8}, {8}, false, true}}) {
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
    ln.weight.data() = ln_weight({4}).data();
    ln.bias.data() = ln_bias({4}).data();
    require_values(ln.forward(x), tensor_of(ln4_y, {2, 3, 4}), 1e-5);

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

// ==== dropout ========================================================================================

TEST_CASE("dropout: kept fraction within 3 sigma of 1 - p and the scale is exact", "[nn][dropout]") {
    manual_seed(7);
    const std::size_t n = 1000000;
    for (double p : {0.1, 0.5, 0.9}) {
        Tensor y = F::dropout(ones({n}), p);
        const real scale = real(1 / (1 - p));
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const real v = y.data()[i];
            REQUIRE((v == 0 || v == scale));  // kept entries are exactly 1/(1 - p)
            kept += v != 0;
        }
        const double sigma = std::sqrt(n * p * (1 - p));  // binomial(n, 1 - p)
        INFO("p = " << p << ": kept " << kept << " of " << n);
        REQUIRE(std::fabs(double(kept) - n * (1 - p)) < 3 * sigma);
    }
}

TEST_CASE("dropout: the backward multiplies by the same mask", "[nn][dropout]") {
    manual_seed(8);
    const real scale = real(1 / (1 - 0.3));
    Tensor x = from_array(Array(rand({5, 40}).data() + 0.5), true);  // never 0, so y ≠ 0 ⇔ kept
    Tensor y = F::dropout(x, 0.3);
    Tensor g = randn({5, 40});
    y.backward(g);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.numel(); ++i) {
        const bool k = y.data()[i] != 0;
        kept += k;
        REQUIRE(y.data()[i] == (k ? x.data()[i] * scale : 0));
        REQUIRE(x.grad().data()[i] == (k ? g.data()[i] * scale : 0));
    }
    REQUIRE(kept > 0);
    REQUIRE(kept < x.numel());
}

TEST_CASE("dropout: manual_seed reproduces the mask", "[nn][dropout]") {
    Tensor x = ones({1001});
    manual_seed(42);
    Tensor a = F::dropout(x, 0.5);
    Tensor b = F::dropout(x, 0.5);
    manual_seed(42);
    Tensor c = F::dropout(x, 0.5);
    REQUIRE(bits_equal(a, c));
    REQUIRE(!bits_equal(a, b));  // the generator moved on
}

TEST_CASE("dropout: eval and p = 0 are the identity - p = 1 gives zeros", "[nn][dropout]") {
    Tensor x = randn({3, 4}, true);
    REQUIRE(F::dropout(x, 0.5, /*training=*/false).impl() == x.impl());
    REQUIRE(F::dropout(x, 0.0).impl() == x.impl());

    Tensor y = F::dropout(x, 1.0);
    require_values(y, zeros({3, 4}), 0);
    y.backward(ones({3, 4}));
    require_values(x.grad(), zeros({3, 4}), 0);

    // The module follows train()/eval(), also as a submodule.
    struct Net : nn::Module {
        std::shared_ptr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    } net;
    REQUIRE(net.drop->p() == 0.5);
    REQUIRE(net.num_parameters() == 0);
    Tensor big = ones({1000});
    REQUIRE(!bits_equal(net.drop->forward(big), big));  // training by default
    net.eval();
    REQUIRE(net.drop->forward(big).impl() == big.impl());
    net.train();
    REQUIRE(!bits_equal(net.drop->forward(big), big));
}

TEST_CASE("hostile: dropout with p outside 0 to 1 or NaN", "[nn][dropout][hostile]") {
    Tensor x = ones({4});
    for (double p : {-0.1, 1.5, std::nan(""), double(kInf)}) {
        INFO("p = " << p);
        CHECK_THAT(message_of<ValueError>([&] { F::dropout(x, p); }), Contains("dropout") && Contains("[0, 1]"));
        CHECK_THAT(message_of<ValueError>([&] { F::dropout(x, p, /*training=*/false); }), Contains("[0, 1]"));
        CHECK_THAT(message_of<ValueError>([&] { nn::Dropout d(p); }), Contains("Dropout"));
    }
    CHECK_THAT(message_of<ValueError>([] { F::dropout(Tensor()); }), Contains("undefined"));
    REQUIRE(F::dropout(zeros({0, 3}), 0.5).shape() == Shape{0, 3});
}

// ---- ModuleList ----------------------------------------------------------------------------------

TEST_CASE("ModuleList: children named by position - indexing - iteration in order", "[nn][module_list]") {
    nn::ModuleList<nn::LayerNorm> list;
    for (std::int64_t d : {2, 3, 4}) list.push_back(std::make_shared<nn::LayerNorm>(d));
    REQUIRE(list.size() == 3);
    const NamedTensors params = list.named_parameters();
    REQUIRE(params.size() == 6);
    REQUIRE(params[0].first == "0.weight");
    REQUIRE(params[3].first == "1.bias");
    REQUIRE(params[5].first == "2.bias");
    REQUIRE(list[1]->weight.shape() == Shape{3});
    std::vector<std::size_t> widths;
    for (const auto& ln : list) widths.push_back(ln->weight.numel());
    REQUIRE(widths == std::vector<std::size_t>{2, 3, 4});
    CHECK_THAT(message_of<ValueError>([&] { (void)list[3]; }), Contains("ModuleList") && Contains("[0, 3)"));
}
