// tests/nn/test_loss.cpp — the losses (nn/loss.hpp): cross_entropy, nll_loss, mse_loss,
// binary_cross_entropy_with_logits. Expected numbers are computed by hand in double, or by a
// second path: nll_loss(log_softmax(x)) for the fused cross_entropy.
//
// Legend: B batch, T time, C classes, N rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

double log_sum_exp(const std::vector<double>& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double s = 0;
    for (double v : x) s += std::exp(v - m);
    return m + std::log(s);
}

}  // namespace

// =============================================================================================
// cross_entropy
// =============================================================================================

TEST_CASE("CrossEntropyOptions: the setters chain, set their option and leave the others", "[nn][loss][cross_entropy]") {
    const auto o =
        F::CrossEntropyOptions().reduction(nn::Reduction::Sum).ignore_index(1).label_smoothing(0.25);
    REQUIRE(o.reduction() == nn::Reduction::Sum);
    REQUIRE(o.ignore_index() == 1);
    REQUIRE(o.label_smoothing() == 0.25);
    const auto d = F::CrossEntropyOptions().ignore_index(2);
    REQUIRE(d.reduction() == nn::Reduction::Mean);
    REQUIRE(d.label_smoothing() == 0.0);
    // Zero logits (2, 3): every row's loss is ln 3, smoothed or not (the softmax is uniform).
    // Targets {0, 1} with target 1 ignored, summed: one row, ln 3.
    const Tensor logits = zeros({2, 3});
    REQUIRE(F::cross_entropy(logits, IndexTensor{0, 1}, o).item() == Approx(std::log(3.0)).epsilon(1e-6));
}

TEST_CASE("cross_entropy on a hand-computed 2×3 example", "[nn][loss][cross_entropy]") {
    // loss_i = lse(x_i) - x_i[t_i],   lse(x) = log Σ_c e^(x_c)
    const std::vector<std::vector<double>> X{{1, 2, 3}, {1, -1, 0.5}};
    const std::vector<int> t{2, 0};
    const double l0 = log_sum_exp(X[0]) - X[0][2];
    const double l1 = log_sum_exp(X[1]) - X[1][0];
    REQUIRE(l0 == Approx(0.40760596444438).epsilon(1e-12));  // -log softmax([1,2,3])[2]

    Tensor logits({{1, 2, 3}, {1, -1, 0.5}}, true);
    IndexTensor targets{2, 0};
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.shape() == Shape{});
    REQUIRE(loss.item() == Approx((l0 + l1) / 2).epsilon(1e-6));

    // dL/dx = (softmax(x) - onehot(t)) / N
    loss.backward();
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t c = 0; c < 3; ++c) {
            const double p = std::exp(X[i][c] - log_sum_exp(X[i]));
            const double expected = (p - (int(c) == t[i] ? 1.0 : 0.0)) / 2;
            REQUIRE(logits.grad().at({i, c}) == Approx(expected).margin(1e-7));
        }

    // Reductions.
    REQUIRE(F::cross_entropy(logits, targets, ce(nn::Reduction::Sum)).item() == Approx(l0 + l1).epsilon(1e-6));
    Tensor none = F::cross_entropy(logits, targets, ce(nn::Reduction::None));
    REQUIRE(none.shape() == Shape{2});
    require_values(none, {real(l0), real(l1)}, 1e-6);
    // Reduction::None backward: row i is scaled by its own upstream gradient.
    logits.reset_grad();
    none.backward(Tensor({1, 0}));
    require_values(Tensor(Array(xt::view(logits.grad().data(), 1))), {0, 0, 0}, 0);
}

TEST_CASE("cross_entropy (BxTxC) with (BxT) equals the flattened (B·TxC)", "[nn][loss][cross_entropy]") {
    manual_seed(5);
    Tensor x3 = randn({2, 3, 4}, true);
    Tensor x2 = from_array(x3.detach().reshape({6, 4}).data(), true);
    IndexTensor t3{{0, 3, 1}, {2, 2, 0}};
    IndexTensor t2 = t3.reshape({6});
    Tensor l3 = F::cross_entropy(x3, t3), l2 = F::cross_entropy(x2, t2);
    REQUIRE(l3.item() == Approx(l2.item()).epsilon(1e-6));
    l3.backward();
    l2.backward();
    REQUIRE(x3.grad().shape() == Shape{2, 3, 4});
    require_values(x3.grad().reshape({6, 4}), x2.grad(), 1e-6);
    REQUIRE(F::cross_entropy(x3, t3, ce(nn::Reduction::None)).shape() == Shape{2, 3});
}

TEST_CASE("cross_entropy ignore_index: ignored rows count for nothing", "[nn][loss][cross_entropy]") {
    Tensor logits({{1, 2, 3}, {5, 0, 0}, {1, -1, 0.5}}, true);
    IndexTensor targets{2, -100, 0};
    const double l0 = log_sum_exp({1, 2, 3}) - 3, l2 = log_sum_exp({1, -1, 0.5}) - 1;
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.item() == Approx((l0 + l2) / 2).epsilon(1e-6));  // divided by 2 valid rows, not 3
    loss.backward();
    require_values(Tensor(Array(xt::view(logits.grad().data(), 1))), {0, 0, 0}, 0);
    REQUIRE(logits.grad().at({0, 2}) == Approx((std::exp(3 - log_sum_exp({1, 2, 3})) - 1) / 2).margin(1e-7));
    require_values(F::cross_entropy(logits, targets, ce(nn::Reduction::None)), {real(l0), 0, real(l2)}, 1e-6);
    REQUIRE(F::cross_entropy(logits, targets, ce(nn::Reduction::Sum)).item() == Approx(l0 + l2).epsilon(1e-6));

    // A custom ignore_index: -100 is now an ordinary (out-of-range) target.
    F::CrossEntropyOptions o;
    o.ignore_index(1);
    REQUIRE(F::cross_entropy(logits, IndexTensor{2, 1, 0}, o).item() == Approx((l0 + l2) / 2).epsilon(1e-6));
    CHECK_THAT(message_of<IndexError>([&] { F::cross_entropy(logits, targets, o); }), Contains("target -100"));
}

TEST_CASE("hostile: cross_entropy with every target ignored: 0 - and a gradient of exact zeros",
          "[nn][loss][cross_entropy][hostile]") {
    Tensor logits({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor loss = F::cross_entropy(logits, IndexTensor{-100, -100});
    REQUIRE(loss.item() == 0);  // PyTorch gives nan (0/0); xgrad documents 0
    loss.backward();
    require_values(logits.grad(), zeros({2, 3}), 0);
    REQUIRE(F::cross_entropy(logits, IndexTensor{-100, -100}, ce(nn::Reduction::Sum)).item() == 0);
}

TEST_CASE("hostile: cross_entropy on an empty batch (0xC)", "[nn][loss][cross_entropy][hostile]") {
    Tensor logits = zeros({0, 5}, true);
    IndexTensor targets(IndexArray::from_shape({0}));
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.item() == 0);
    loss.backward();
    REQUIRE(logits.grad().shape() == Shape{0, 5});
    REQUIRE(F::cross_entropy(logits, targets, ce(nn::Reduction::Sum)).item() == 0);
    REQUIRE(F::cross_entropy(logits, targets, ce(nn::Reduction::None)).shape() == Shape{0});
    REQUIRE(F::cross_entropy(zeros({2, 0, 5}), IndexTensor(IndexArray::from_shape({2, 0}))).item() == 0);
    // (N, 0): no classes at all.
    CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(zeros({0, 0}), targets); }), Contains("no classes"));
}

TEST_CASE("hostile: cross_entropy with extreme logits", "[nn][loss][cross_entropy][hostile]") {
    // 1e4 would overflow e^x in float and double; the max-subtracted form stays finite.
    Tensor big({{1e4, -1e4, 0}, {1e4, -1e4, 0}}, true);
    Tensor none = F::cross_entropy(big, IndexTensor{0, 1}, ce(nn::Reduction::None));
    require_values(none, {0, 2e4}, 1e-6);
    F::cross_entropy(big, IndexTensor{0, 1}).backward();
    // Row 0: p = (1, 0, 0) = onehot → 0. Row 1: p - onehot(1) = (1, -1, 0), / 2.
    require_values(big.grad(), {{0, 0, 0}, {0.5, -0.5, 0}}, 1e-7);

    // A -inf (masked) logit: p = 0 there, so its gradient is exactly 0 and the loss finite.
    Tensor masked({{-kInf, 1, 2}}, true);
    Tensor l = F::cross_entropy(masked, IndexTensor{2});
    REQUIRE(std::isfinite(l.item()));
    REQUIRE(l.item() == Approx(log_sum_exp({1, 2}) - 2).epsilon(1e-6));
    l.backward();
    REQUIRE(masked.grad().at({0, 0}) == 0);
    REQUIRE_FALSE(std::signbit(masked.grad().at({0, 0})));
    REQUIRE(std::isfinite(masked.grad().at({0, 1})));

    // Documented non-finite cases, as in PyTorch (none of them crashes):
    //   the target's own logit is -inf        → loss +inf
    //   label smoothing with a -inf logit     → loss +inf (ε/C · (-log 0))
    //   every logit -inf, or a +inf logit     → nan (inf - inf)
    Tensor t_masked({{-kInf, 1, 2}});
    REQUIRE(F::cross_entropy(t_masked, IndexTensor{0}).item() == kInf);
    F::CrossEntropyOptions smooth;
    smooth.label_smoothing(0.1);
    REQUIRE(F::cross_entropy(t_masked, IndexTensor{2}, smooth).item() == kInf);
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{-kInf, -kInf}}), IndexTensor{0}).item()));
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{kInf, 0}}), IndexTensor{0}).item()));
}

TEST_CASE("hostile: cross_entropy with a NaN logit: NaN in that row only - no crash",
          "[nn][loss][cross_entropy][hostile]") {
    // NaN propagates (as in PyTorch): the row's loss and gradient are NaN, the other rows'
    // are unaffected under Reduction::None, and the mean is NaN.
    Tensor logits({{0, kNaN, 2}, {1, 2, 3}}, true);
    Tensor none = F::cross_entropy(logits, IndexTensor{0, 2}, ce(nn::Reduction::None));
    REQUIRE(std::isnan(none.at({0})));
    REQUIRE(none.at({1}) == Approx(log_sum_exp({1, 2, 3}) - 3).epsilon(1e-6));
    none.backward(Tensor({1, 1}));
    for (std::int64_t c = 0; c < 3; ++c) {
        REQUIRE(std::isnan(logits.grad().at({0, c})));
        REQUIRE(std::isfinite(logits.grad().at({1, c})));
    }
    REQUIRE(std::isnan(F::cross_entropy(logits, IndexTensor{0, 2}).item()));
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{kNaN, 1}}), IndexTensor{1}).item()));  // NaN first
    // An ignored row's NaN does not leak into the loss.
    REQUIRE(F::cross_entropy(logits, IndexTensor{-100, 2}).item() == Approx(log_sum_exp({1, 2, 3}) - 3).epsilon(1e-6));
}

TEST_CASE("cross_entropy label_smoothing against the formula", "[nn][loss][cross_entropy]") {
    // q_c = (1 - ε)[c = t] + ε/C,   loss_i = -Σ_c q_c log p_c
    const double eps = 0.1;
    const std::vector<std::vector<double>> X{{1, 2, 3}, {1, -1, 0.5}};
    const std::vector<std::int64_t> t{2, 0};
    Tensor logits({{1, 2, 3}, {1, -1, 0.5}}, true);
    F::CrossEntropyOptions o;
    o.label_smoothing(eps);
    o.reduction(nn::Reduction::None);
    Tensor none = F::cross_entropy(logits, IndexTensor{2, 0}, o);
    double total = 0;
    for (std::int64_t i = 0; i < 2; ++i) {
        double li = 0;
        for (std::int64_t c = 0; c < 3; ++c) {
            const double q = (c == t[i] ? 1 - eps : 0) + eps / 3;
            li -= q * (X[i][c] - log_sum_exp(X[i]));
        }
        REQUIRE(none.at({i}) == Approx(li).epsilon(1e-6));
        total += li;
    }
    o.reduction(nn::Reduction::Mean);
    Tensor mean = F::cross_entropy(logits, IndexTensor{2, 0}, o);
    REQUIRE(mean.item() == Approx(total / 2).epsilon(1e-6));
    mean.backward();  // (p - q) / N
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t c = 0; c < 3; ++c) {
            const double q = (c == t[i] ? 1 - eps : 0) + eps / 3;
            REQUIRE(logits.grad().at({i, c}) == Approx((std::exp(X[i][c] - log_sum_exp(X[i])) - q) / 2).margin(1e-7));
        }
    // ε = 1: the target is uniform, loss = lse - mean(x).
    o.label_smoothing(1);
    o.reduction(nn::Reduction::None);
    REQUIRE(F::cross_entropy(logits, IndexTensor{2, 0}, o).at({0}) == Approx(log_sum_exp(X[0]) - 2).epsilon(1e-6));

    for (double bad : {-0.1, 1.5, double(NAN)}) {
        o.label_smoothing(bad);
        CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(logits, IndexTensor{2, 0}, o); }),
                   Contains("label_smoothing") && Contains("outside [0, 1]"));
    }
}

TEST_CASE("fused cross_entropy equals the composed nll_loss(log_softmax(x))", "[nn][loss][cross_entropy]") {
    manual_seed(6);
    Tensor x = from_array(Array(5 * randn({8, 6}).data()), true);  // logits up to ~±15
    Tensor xc = from_array(x.data(), true);
    IndexTensor t{0, 5, 3, 3, -100, 1, 2, 4};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum}) {
        x.reset_grad();
        xc.reset_grad();
        Tensor fused = F::cross_entropy(x, t, ce(r));
        Tensor composed = F::nll_loss(log_softmax(xc, -1), t, ce(r));
        REQUIRE(fused.item() == Approx(composed.item()).epsilon(1e-5));
        fused.backward();
        composed.backward();
        require_values(x.grad(), xc.grad(), 1e-5);
    }
}

TEST_CASE("hostile: cross_entropy and nll_loss: bad targets and shapes", "[nn][loss][hostile][regression]") {
    Tensor logits({{1, 2, 3}, {4, 5, 6}});
    for (auto fn : {&F::cross_entropy, &F::nll_loss}) {
        const std::string op = fn == &F::cross_entropy ? "cross_entropy" : "nll_loss";
        INFO(op);
        auto call = [&](const Tensor& x, const IndexTensor& t) { return fn(x, t, F::CrossEntropyOptions{}); };
        const std::string msg = message_of<IndexError>([&] { call(logits, IndexTensor{0, 3}); });
        REQUIRE(msg == op + ": target 3 at position (1) out of range [0, 3) (ignore_index is -100)");
        CHECK_THAT(message_of<IndexError>([&] { call(logits, IndexTensor{-1, 0}); }), Contains("target -1"));
        CHECK_THAT(message_of<IndexError>([&] { call(logits, IndexTensor{-101, 0}); }), Contains("target -101"));
        // Shapes: targets (N,) for (N, C), (B, T) for (B, T, C).
        CHECK_THAT(message_of<ValueError>([&] { call(logits, IndexTensor{0, 1, 2}); }),
                   Contains(op) && Contains("(2, 3)") && Contains("(3)"));
        CHECK_THAT(message_of<ValueError>([&] { call(logits, IndexTensor{{0}, {1}}); }), Contains("(2, 1)"));
        CHECK_THAT(message_of<ValueError>([&] { call(Tensor({1, 2, 3}), IndexTensor(IndexArray(std::int64_t(0)))); }),
                   Contains("do not match"));
        CHECK_THAT(message_of<ValueError>([&] { call(zeros({2, 3, 4}), IndexTensor{0, 1}); }), Contains("(2, 3, 4)"));
        CHECK_THAT(message_of<ValueError>([&] { call(Tensor(), IndexTensor{0}); }), Contains("undefined"));
    }
    // A Reduction cast from an arbitrary integer would otherwise act as Sum with a zero gradient.
    const auto bogus = static_cast<nn::Reduction>(42);
    Tensor x({{1, 2}}, true);
    F::CrossEntropyOptions o;
    o.reduction(bogus);
    CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(x, IndexTensor{0}, o); }),
               Contains("cross_entropy: unknown reduction 42"));
    CHECK_THAT(message_of<ValueError>([&] { F::nll_loss(x, IndexTensor{0}, o); }), Contains("unknown reduction"));
    CHECK_THAT(message_of<ValueError>([&] { F::mse_loss(x, x, bogus); }), Contains("mse_loss: unknown reduction"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(x, zeros({1, 2}), bogus); }),
               Contains("unknown reduction"));
}

// =============================================================================================
// nll_loss, mse_loss, binary_cross_entropy_with_logits
// =============================================================================================

TEST_CASE("nll_loss on hand numbers", "[nn][loss]") {
    Tensor lp({{-0.1, -2, -3}, {-1, -0.5, -4}}, true);
    Tensor loss = F::nll_loss(lp, IndexTensor{0, 1});
    REQUIRE(loss.item() == Approx((0.1 + 0.5) / 2).epsilon(1e-6));
    loss.backward();
    require_values(lp.grad(), {{-0.5, 0, 0}, {0, -0.5, 0}}, 0);
    require_values(F::nll_loss(lp, IndexTensor{2, -100}, ce(nn::Reduction::None)), {3, 0}, 1e-7);
    REQUIRE(F::nll_loss(lp, IndexTensor{2, 2}, ce(nn::Reduction::Sum)).item() == Approx(7).epsilon(1e-6));
    REQUIRE(F::nll_loss(lp, IndexTensor{-100, -100}).item() == 0);
    F::CrossEntropyOptions o;
    o.label_smoothing(0.1);
    CHECK_THAT(message_of<ValueError>([&] { F::nll_loss(lp, IndexTensor{0, 1}, o); }),
               Contains("nll_loss") && Contains("label_smoothing"));
}

TEST_CASE("mse_loss on hand numbers", "[nn][loss]") {
    Tensor x({1, 2, 3}, true);
    Tensor y({1, 0, 5});
    Tensor loss = F::mse_loss(x, y);  // (0 + 4 + 4) / 3
    REQUIRE(loss.item() == Approx(8.0 / 3).epsilon(1e-6));
    loss.backward();  // 2 (x - y) / 3
    require_values(x.grad(), {0, 4.0 / 3, -4.0 / 3}, 1e-6);
    REQUIRE(F::mse_loss(x, y, nn::Reduction::Sum).item() == 8);
    require_values(F::mse_loss(x, y, nn::Reduction::None), {0, 4, 4}, 0);
    CHECK_THAT(message_of<ValueError>([&] { F::mse_loss(x, Tensor({1, 2})); }),
               Contains("mse_loss") && Contains("(3)") && Contains("(2)"));
}

TEST_CASE("hostile: mse_loss: NaN and empty inputs", "[nn][loss][hostile][regression]") {
    REQUIRE(std::isnan(F::mse_loss(Tensor({1, kNaN}), Tensor({1, 1})).item()));
    // The mean over no elements is 0 (as cross_entropy with nothing to count), not an error.
    Tensor e = zeros({0, 4}, true);
    Tensor l = F::mse_loss(e, zeros({0, 4}));
    REQUIRE(l.item() == 0);
    l.backward();
    REQUIRE(e.grad().shape() == Shape{0, 4});
    REQUIRE(F::mse_loss(e, zeros({0, 4}), nn::Reduction::Sum).item() == 0);
}

TEST_CASE("binary_cross_entropy_with_logits on hand numbers and reductions", "[nn][loss][bce]") {
    // ℓ = max(x, 0) - x y + log(1 + e^(-|x|))
    const double x[] = {0, 2, -3}, y[] = {0, 1, 0.5};
    double l[3], total = 0;
    for (int i = 0; i < 3; ++i) {
        const double sig = 1 / (1 + std::exp(-x[i]));
        l[i] = -(y[i] * std::log(sig) + (1 - y[i]) * std::log(1 - sig));  // the textbook form
        total += l[i];
    }
    REQUIRE(l[0] == Approx(std::log(2.0)));
    Tensor logits({0, 2, -3}, true);
    Tensor targets({0, 1, 0.5});
    Tensor loss = F::binary_cross_entropy_with_logits(logits, targets);
    REQUIRE(loss.item() == Approx(total / 3).epsilon(1e-6));
    loss.backward();  // (σ(x) - y) / 3
    for (std::int64_t i = 0; i < 3; ++i)
        REQUIRE(logits.grad().at({i}) == Approx((1 / (1 + std::exp(-x[i])) - y[i]) / 3).margin(1e-7));
    REQUIRE(F::binary_cross_entropy_with_logits(logits, targets, nn::Reduction::Sum).item() ==
            Approx(total).epsilon(1e-6));
    require_values(F::binary_cross_entropy_with_logits(logits, targets, nn::Reduction::None),
                   {real(l[0]), real(l[1]), real(l[2])}, 1e-6);
}

TEST_CASE("hostile: binary_cross_entropy_with_logits: |x| = 1e4 - NaN - bad targets - empty",
          "[nn][loss][bce][hostile][regression]") {
    // The textbook form would take log(σ(-1e4)) = log(0) = -inf; the stable one gives exact values.
    Tensor x({1e4, -1e4, 1e4, -1e4}, true);
    Tensor y({1, 0, 0, 1});
    require_values(F::binary_cross_entropy_with_logits(x, y, nn::Reduction::None), {0, 0, 1e4, 1e4}, 0);
    Tensor loss = F::binary_cross_entropy_with_logits(x, y);
    REQUIRE(loss.item() == 5e3f);
    loss.backward();  // (σ(x) - y) / 4 = (0, 0, 1, -1) / 4
    require_values(x.grad(), {0, 0, 0.25, -0.25}, 0);

    Tensor bad({kNaN, 1});
    Tensor none = F::binary_cross_entropy_with_logits(bad, Tensor({1, 1}), nn::Reduction::None);
    REQUIRE(std::isnan(none.at({0})));
    REQUIRE(none.at({1}) == Approx(std::log1p(std::exp(-1.0))).epsilon(1e-6));

    // Targets are probabilities: outside [0, 1] (or NaN) is a mistake, e.g. class IDs passed
    // as floats, and would give a loss without meaning (here a negative one).
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0, 1}), Tensor({0, 2})); }),
               Contains("binary_cross_entropy_with_logits") && Contains("target 2 at position (1)") &&
                   Contains("[0, 1]"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0}), Tensor({-0.5})); }),
               Contains("target -0.5"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0}), Tensor({kNaN})); }),
               Contains("target nan"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0, 1}), Tensor({0})); }),
               Contains("same shape"));

    // x = ±∞: the limits, 0 when the target is exactly the side x points to, +∞ otherwise
    // (the formula itself would give ∞ - ∞ = nan). The gradient σ(x) - y stays finite.
    Tensor xi({kInf, -kInf, kInf, -kInf, kInf}, true);
    Tensor yi({1, 0, 0, 1, 0.5});
    require_values(F::binary_cross_entropy_with_logits(xi, yi, nn::Reduction::None), {0, 0, kInf, kInf, kInf}, 0);
    F::binary_cross_entropy_with_logits(xi, yi, nn::Reduction::Sum).backward();
    require_values(xi.grad(), {0, 0, 1, -1, 0.5}, 0);

    Tensor e = zeros({0}, true);
    Tensor le = F::binary_cross_entropy_with_logits(e, zeros({0}));
    REQUIRE(le.item() == 0);
    le.backward();
    REQUIRE(e.grad().shape() == Shape{0});
}
