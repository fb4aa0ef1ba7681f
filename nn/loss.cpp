// nn/loss.cpp — forward and backward of the losses in nn/loss.hpp.
// Legend: N rows, C classes; g = dL/d(loss), () for Mean/Sum or the targets' shape for None.
#include <xgrad/nn/loss.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/reduction.hpp>

namespace xgrad::nn::functional {

namespace {

// A Reduction cast from an arbitrary integer would otherwise act as Sum with a zero gradient.
void check_reduction(Reduction r, const char* op) {
    check(r == Reduction::Mean || r == Reduction::Sum || r == Reduction::None, op,
          "unknown reduction {}; use Reduction::Mean, Sum or None", static_cast<int>(r));
}

// The multi-index of flat (row-major) element `flat` in `shape`: "(1, 2)".
std::string position_str(std::size_t flat, const ArrayShape& shape) {
    std::vector<std::size_t> pos(shape.size());
    for (std::size_t i = shape.size(); i-- > 0;) {
        pos[i] = flat % shape[i];
        flat /= shape[i];
    }
    return shape_str(pos);
}

}  // namespace

// ---- shared by the classification losses --------------------------------------------------------
namespace {

// Checks logits (..., C) against targets (...) and returns (N, C) with N = targets.numel().
std::pair<std::size_t, std::size_t> class_shapes(const Tensor& logits, const IndexTensor& targets,
                                                 const CrossEntropyOptions& o, const char* op) {
    check_defined(logits, op, "the input");
    check_reduction(o.reduction(), op);
    const ArrayShape ls = array_shape(logits.data()), ts = array_shape(targets.data());
    check(ls.size() >= 2 && ls.size() == ts.size() + 1 && std::equal(ts.begin(), ts.end(), ls.begin()), op,
          "logits {} and targets {} do not match: expected logits (N, C) with targets (N,), "
          "or (B, T, C) with (B, T)",
          lazy_shape(ls), lazy_shape(ts));
    const std::size_t C = ls.back(), N = targets.numel();
    check(C > 0, op, "logits {} have no classes", lazy_shape(ls));
    const std::int64_t* t = targets.data().data();
    for (std::size_t i = 0; i < N; ++i) {
        if (t[i] == o.ignore_index() || (t[i] >= 0 && t[i] < static_cast<std::int64_t>(C))) continue;
        throw IndexError(fmt::format("{}: target {} at position {} out of range [0, {}) (ignore_index is {})", op,
                                     t[i], position_str(i, ts), C, o.ignore_index()));
    }
    return {N, C};
}

// Per-row weight of dL/d(loss_i) for each reduction: g, g / n_valid, or g_i.
real row_scale(const Array& g, Reduction r, std::size_t i, std::size_t n_valid) {
    switch (r) {
        case Reduction::Sum: return g();
        case Reduction::Mean: return n_valid == 0 ? real(0) : g() / static_cast<real>(n_valid);
        case Reduction::None: return g.data()[i];
    }
    return 0;
}

// Reduces per-row losses (N,) to the requested output: () or the targets' shape.
Array reduce_rows(const std::vector<double>& loss, Reduction r, std::size_t n_valid, const ArrayShape& none_shape) {
    if (r == Reduction::None) {
        Array out(none_shape);
        for (std::size_t i = 0; i < loss.size(); ++i) out.data()[i] = static_cast<real>(loss[i]);
        return out;
    }
    double total = 0;
    for (double l : loss) total += l;
    if (r == Reduction::Mean) total = n_valid == 0 ? 0.0 : total / static_cast<double>(n_valid);
    Array out = xt::zeros<real>(ArrayShape{});
    out() = static_cast<real>(total);
    return out;
}

}  // namespace

// ---- cross_entropy (fused log-softmax + NLL) ---------------------------------------------------
// For row i with logits x (C,), target t and smoothing ε, with the max-subtracted log-sum-exp
//   m = max_c x_c,   lse = m + log Σ_c e^(x_c - m),   log p_c = x_c - lse
//   q_c = (1 - ε)·[c = t] + ε / C                                   (the smoothed target)
//   loss_i = -Σ_c q_c log p_c = (1 - ε)(lse - x_t) + ε (lse - mean_c x_c)
// backward: dL/dx_c = s_i · (p_c - q_c),  s_i = g / N_valid (mean), g (sum) or g_i (none)
// Fused for stability: log(softmax) composed loses precision for large logits; a -inf logit
// has p_c = 0 (gradient 0 without smoothing). Ignored targets give loss 0 and gradient 0.
// ref: PyTorch docs, torch.nn.functional.cross_entropy (label smoothing: Szegedy et al. 2016)
namespace {

// The max of one row, with four independent running values to break the dependent chain.
real row_max(const real* x, std::size_t C) {
    if (C == 0) return 0;
    real m[4] = {x[0], x[0], x[0], x[0]};
    std::size_t c = 0;
    for (; c + 4 <= C; c += 4)
        for (std::size_t k = 0; k < 4; ++k) m[k] = std::max(m[k], x[c + k]);
    for (; c < C; ++c) m[0] = std::max(m[0], x[c]);
    return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const IndexTensor& targets, const CrossEntropyOptions& o) {
    const char* op = "cross_entropy";
    const profiler::OpScope scope(op, logits);
    check(o.label_smoothing() >= 0 && o.label_smoothing() <= 1, op, "label_smoothing {} outside [0, 1]",
          o.label_smoothing());
    const auto [N, C] = class_shapes(logits, targets, o, op);
    const real* x = logits.data().data();
    const std::int64_t* t = targets.data().data();
    const double eps = o.label_smoothing();

    // Pass 1: e^(x - m) for all of (N, C). Pass 2, per row: Σ in double, lse, the loss, p_c = e^(x_c - lse).
    Array probs(ArrayShape{N, C});  // softmax, saved for the backward
    std::vector<double> max_i(N, 0.0);  // m of each row
    for (std::size_t i = 0; i < N; ++i) {
        const real* xi = x + i * C;
        real* pi = probs.data() + i * C;
        const real m = row_max(xi, C);
        max_i[i] = m;
        for (std::size_t c = 0; c < C; ++c) pi[c] = xi[c] - m;  // every exponent <= 0
    }
    xt::noalias(probs) = xt::exp(probs);
    std::vector<double> loss(N, 0.0);
    std::size_t n_valid = 0;
    for (std::size_t i = 0; i < N; ++i) {
        if (t[i] == o.ignore_index()) continue;
        ++n_valid;
        const real* xi = x + i * C;
        real* pi = probs.data() + i * C;
        const double s = sum_double(pi, C);  // Σ_c e^(x_c - m)
        const double lse = max_i[i] + std::log(s);
        const double inv_s = 1 / s;  // one division per row, not per class
        for (std::size_t c = 0; c < C; ++c) pi[c] = static_cast<real>(pi[c] * inv_s);
        const double sum_x = eps > 0 ? sum_double(xi, C) : 0.0;
        loss[i] = (1 - eps) * (lse - xi[t[i]]) + (eps > 0 ? eps * (lse - sum_x / double(C)) : 0.0);
    }
    return make_result(reduce_rows(loss, o.reduction(), n_valid, array_shape(targets.data())), op, {logits},
                       [probs = std::move(probs), targets, o, N = N, C = C, n_valid, shape = logits.data().shape()](
                           const Array& g, const Array&) {
                           Array dx(shape);
                           const std::int64_t* t = targets.data().data();
                           const double eps = o.label_smoothing();
                           for (std::size_t i = 0; i < N; ++i) {
                               real* dxi = dx.data() + i * C;
                               if (t[i] == o.ignore_index()) {
                                   std::fill(dxi, dxi + C, real(0));
                                   continue;
                               }
                               // s · (p_c − ε/C) for every class, then − s·(1 − ε) at the target
                               const double s = row_scale(g, o.reduction(), i, n_valid);
                               const real* pi = probs.data() + i * C;
                               const real scale = static_cast<real>(s), smooth = static_cast<real>(eps / double(C));
                               for (std::size_t c = 0; c < C; ++c) dxi[c] = scale * (pi[c] - smooth);
                               dxi[t[i]] = static_cast<real>(s * (double(pi[t[i]]) - (1 - eps) - eps / double(C)));
                           }
                           return make_grads(std::move(dx));
                       });
}

// ---- nll_loss --------------------------------------------------------------------------------------
// forward : loss_i = -lp[i, t_i]            lp (N, C) log-probabilities
// backward: dL/dlp[i, t_i] = -s_i, every other entry 0
// ref: PyTorch docs, torch.nn.functional.nll_loss
Tensor nll_loss(const Tensor& log_probs, const IndexTensor& targets, const CrossEntropyOptions& o) {
    const char* op = "nll_loss";
    const profiler::OpScope scope(op, log_probs);
    check(o.label_smoothing() == 0, op, "label_smoothing is not supported; got {}", o.label_smoothing());
    const auto [N, C] = class_shapes(log_probs, targets, o, op);
    const real* lp = log_probs.data().data();
    const std::int64_t* t = targets.data().data();
    std::vector<double> loss(N, 0.0);
    std::size_t n_valid = 0;
    for (std::size_t i = 0; i < N; ++i) {
        if (t[i] == o.ignore_index()) continue;
        ++n_valid;
        loss[i] = -double(lp[i * C + std::size_t(t[i])]);
    }
    return make_result(reduce_rows(loss, o.reduction(), n_valid, array_shape(targets.data())), op, {log_probs},
                       [targets, o, N = N, C = C, n_valid, shape = log_probs.data().shape()](const Array& g, const Array&) {
                           Array dx = xt::zeros<real>(shape);
                           const std::int64_t* t = targets.data().data();
                           for (std::size_t i = 0; i < N; ++i)
                               if (t[i] != o.ignore_index())
                                   dx.data()[i * C + std::size_t(t[i])] = -row_scale(g, o.reduction(), i, n_valid);
                           return make_grads(std::move(dx));
                       });
}

// ---- mse_loss (composed) -----------------------------------------------------------------------
// loss = reduce((input - target)²); its backward comes from sub, pow, mean/sum.
// The mean of no elements is 0 (as for the other losses here; PyTorch gives nan).
// ref: PyTorch docs, torch.nn.functional.mse_loss
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    check_defined(input, "mse_loss", "the input");
    check_defined(target, "mse_loss", "the target");
    check_reduction(reduction, "mse_loss");
    check(input.shape() == target.shape(), "mse_loss", "input {} and target {} must have the same shape",
          shape_str(input.shape()), shape_str(target.shape()));
    Tensor sq = pow(input - target, 2);
    switch (reduction) {
        case Reduction::Mean: return sq.numel() == 0 ? sum(sq) : mean(sq);
        case Reduction::Sum: return sum(sq);
        case Reduction::None: return sq;
    }
    return sq;
}

// ---- binary_cross_entropy_with_logits (fused) ---------------------------------------------------
// forward : ℓ_i = max(x_i, 0) - x_i y_i + log(1 + e^(-|x_i|))
//           (= -y log σ(x) - (1 - y) log(1 - σ(x)), rearranged so no exponent is positive)
// backward: dL/dx_i = s_i · (σ(x_i) - y_i),  s_i = g / n (mean), g (sum) or g_i (none)
// At x = ±∞ the formula gives ∞ - ∞ = nan; the limit is used (PyTorch gives nan there).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction) {
    const char* op = "binary_cross_entropy_with_logits";
    const profiler::OpScope scope(op, logits, targets);
    check_defined(logits, op, "the input");
    check_defined(targets, op, "the target");
    check_reduction(reduction, op);
    check(logits.shape() == targets.shape(), op, "logits {} and targets {} must have the same shape",
          shape_str(logits.shape()), shape_str(targets.shape()));
    const std::size_t n = logits.numel();
    const real* x = logits.data().data();
    const real* y = targets.data().data();
    for (std::size_t i = 0; i < n; ++i)
        check(y[i] >= 0 && y[i] <= 1, op, "target {} at position {} outside [0, 1] (targets are probabilities)",
              y[i], position_str(i, array_shape(targets.data())));
    std::vector<double> loss(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double xi = x[i];
        if (std::isinf(xi)) {  // the limit: 0 if the target is exactly the side x points to, else +∞
            const double miss = xi > 0 ? 1 - y[i] : y[i];
            loss[i] = miss == 0 ? 0.0 : std::numeric_limits<double>::infinity();
            continue;
        }
        loss[i] = std::max(xi, 0.0) - xi * y[i] + std::log1p(std::exp(-std::abs(xi)));
    }
    return make_result(reduce_rows(loss, reduction, n, array_shape(logits.data())), op, {logits},
                       [X = logits.data(), Y = targets.data(), reduction, n](const Array& g, const Array&) {
                           Array dx(X.shape());
                           for (std::size_t i = 0; i < n; ++i) {
                               const double xi = X.data()[i];
                               const double sig = xi >= 0 ? 1 / (1 + std::exp(-xi)) : std::exp(xi) / (1 + std::exp(xi));
                               dx.data()[i] = static_cast<real>(row_scale(g, reduction, i, n) * (sig - Y.data()[i]));
                           }
                           return make_grads(std::move(dx));
                       });
}

}  // namespace xgrad::nn::functional
