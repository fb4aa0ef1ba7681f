// nn/functional.cpp — forward and backward of the layers and losses in nn/functional.hpp.
//
// These ops are built exactly like the core ones (core/ops.cpp): compute the forward into a
// fresh Array, then make_result() with a backward closure that returns one gradient per input.
#include "nn/functional.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "core/autograd.hpp"
#include "core/blas.hpp"
#include "core/ops.hpp"

namespace xgrad::nn::functional {

namespace {

void check_defined(const Tensor& t, const char* op, const char* what) {
    check(t.defined(), op, "{} is an undefined tensor", what);
}

// A Reduction made by casting an arbitrary integer would otherwise be treated as Sum, with a
// zero gradient.
void check_reduction(Reduction r, const char* op) {
    check(r == Reduction::Mean || r == Reduction::Sum || r == Reduction::None, op,
          "unknown reduction {}; use Reduction::Mean, Sum or None", static_cast<int>(r));
}

// The multi-index of flat (row-major) element `flat` in `shape`: "(1, 2)".
std::string position_str(std::size_t flat, const Shape& shape) {
    std::vector<std::size_t> pos(shape.size());
    for (std::size_t i = shape.size(); i-- > 0;) {
        pos[i] = flat % shape[i];
        flat /= shape[i];
    }
    return shape_str(pos);
}

}  // namespace

// ---- linear (fused matmul + bias) ----------------------------------------------------------------
// forward : Y (R, out) = X (R, in) · Wᵀ + b,      R = all leading dims of x flattened
// backward: dX (R, in)   = G (R, out) · W (out, in)
//           dW (out, in) = Gᵀ (out, R) · X (R, in)
//           db (out)     = Σ_r G[r, :]
// One gemm each, with W used transposed in place (no Wᵀ copy): the reason this op is fused
// rather than composed as matmul(x, transpose(W)) + b.
// ref: PyTorch docs, torch.nn.functional.linear
// Empty sizes: R = 0 (an empty batch) gives an empty y and dW = 0; in = 0 gives y = b. A gemm
// whose inner size K is 0 is an empty sum, so its output is zero-filled here rather than left
// to the BLAS library.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    check_defined(x, "linear", "the input");
    check_defined(weight, "linear", "the weight");
    // Shapes are read by reference and formatted only on failure (lazy_shape): this op runs
    // twice per step of a small model, where such overheads add up (bench/, workload W1).
    const auto& ws = weight.data().shape();
    const auto& xs = x.data().shape();
    check(ws.size() == 2, "linear", "weight must be (out, in); got shape {}", lazy_shape(ws));
    const std::size_t out = ws[0], in = ws[1];
    check(xs.size() >= 1 && xs.back() == in, "linear",
          "input of shape {} does not end in in_features = {} (weight {})", lazy_shape(xs), in, lazy_shape(ws));
    if (bias.defined())
        check(bias.dim() == 1 && bias.data().shape()[0] == out, "linear", "bias of shape {} does not match ({},)",
              lazy_shape(bias.data().shape()), out);
    std::size_t R = 1;  // product of the leading dims (not numel / in, which fails for in = 0)
    for (std::size_t i = 0; i + 1 < xs.size(); ++i) R *= xs[i];
    Shape ys(xs.begin(), xs.end());
    ys.back() = out;
    Array y(ys);
    if (in == 0) y.fill(0);
    gemm(false, true, R, out, in, 1, x.data().data(), in, weight.data().data(), in, 0, y.data(), out);
    if (bias.defined()) {
        const real* b = bias.data().data();
        real* py = y.data();  // (plain pointers: the loop vectorises)
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t j = 0; j < out; ++j) py[r * out + j] += b[j];
    }
    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // The backward keeps the handles of x and W, not copies of their arrays.
    return make_result(
        std::move(y), "linear", inputs,
        [x, weight, R, in, out, has_bias = bias.defined(), rx = x.requires_grad(),
         rw = weight.requires_grad(), rb = bias.defined() && bias.requires_grad()](const Array& g, const Array&) {
            const Array& X = x.data();
            const Array& W = weight.data();
            Grads grads(has_bias ? 3 : 2);
            if (rx) {
                Array dx(X.shape());
                gemm(false, false, R, in, out, 1, g.data(), out, W.data(), in, 0, dx.data(), in);
                grads[0] = std::move(dx);
            }
            if (rw) {
                Array dw(W.shape());
                if (R == 0) dw.fill(0);
                gemm(true, false, out, in, R, 1, g.data(), out, X.data(), in, 0, dw.data(), in);
                grads[1] = std::move(dw);
            }
            if (rb) {
                Array db = xt::zeros<real>({out});
                real* pdb = db.data();
                const real* pg = g.data();
                for (std::size_t r = 0; r < R; ++r)
                    for (std::size_t j = 0; j < out; ++j) pdb[j] += pg[r * out + j];
                grads[2] = std::move(db);
            }
            return grads;
        });
}

// ---- embedding ---------------------------------------------------------------------------------------
// forward : y[p, :] = E[ids[p], :]           E (V, d), ids (P...) flattened to P, y (P..., d)
//           the same as one_hot(ids, V) @ E, but d copies per token instead of V·d products
// backward: dL/dE[r, :] = Σ_{p : ids[p] = r, r ≠ padding_idx} g[p, :]
//           a scatter-add into the k distinct rows that appeared: O(P·d) work. Rows that did
//           not appear get no gradient at all (their gradient is exactly 0).
// ref: PyTorch docs, torch.nn.functional.embedding; the lesson "From Token IDs to Embedding Vectors"
Tensor embedding(const Tensor& weight, const IndexTensor& ids, std::optional<std::int64_t> padding_idx,
                 bool sparse, std::shared_ptr<EmbeddingStats> stats) {
    check_defined(weight, "embedding", "the weight");
    check(weight.dim() == 2, "embedding", "weight must be (V, d); got shape {}", lazy_shape(weight.shape()));
    const auto V = static_cast<std::int64_t>(weight.shape()[0]);
    const std::size_t d = weight.shape()[1];
    if (padding_idx) {
        check(*padding_idx >= -V && *padding_idx < V, "embedding", "padding_idx {} out of range [{}, {})",
              *padding_idx, -V, V);
        if (*padding_idx < 0) padding_idx = *padding_idx + V;
    }
    check(!sparse || !weight.requires_grad() || weight.is_leaf(), "embedding",
          "sparse=true needs the weight to be a leaf tensor (a parameter)");
    check_ids(ids, V, "embedding");

    const std::size_t P = ids.numel();
    Shape ys = ids.shape();
    ys.push_back(d);
    Array y(ys);
    const std::int64_t* id = ids.data().data();
    const real* table = weight.data().data();
    for (std::size_t p = 0; p < P; ++p) {
        // Fast path for large tables: the rows are scattered over memory that the caches do not
        // hold, so row p + 2 is requested while row p is copied (bench/, W4 at V = 1e6).
        if (p + 2 < P) {
            const char* ahead = reinterpret_cast<const char*>(table + static_cast<std::size_t>(id[p + 2]) * d);
            for (std::size_t b = 0; b < d * sizeof(real); b += 64) __builtin_prefetch(ahead + b);
        }
        std::copy_n(table + static_cast<std::size_t>(id[p]) * d, d, y.data() + p * d);
    }

    const std::int64_t pad = padding_idx.value_or(-1);
    return make_result(std::move(y), "embedding", {weight},
                       [ids, pad, sparse, stats, d](const Array& g, const Array&) -> Grads {
        const std::size_t P = ids.numel();
        const std::int64_t* id = ids.data().data();

        if (!sparse) {
            // Dense: the (kept, d) rows of g with their ids; the engine adds each into its row
            // of weight.grad (allocated as zeros once). A non-leaf weight gets them densified.
            RowSparseGrad r;
            r.indices.reserve(P);
            for (std::size_t p = 0; p < P; ++p)
                if (id[p] != pad) r.indices.push_back(id[p]);  // every lookup but padding_idx's
            const std::size_t kept = r.indices.size();
            r.rows = Array(Shape{kept, d});
            for (std::size_t p = 0, k = 0; p < P; ++p)
                if (id[p] != pad) std::copy_n(g.data() + p * d, d, r.rows.data() + d * k++);
            if (stats) {
                std::vector<std::int64_t> distinct(r.indices);  // sorted only to count them
                std::sort(distinct.begin(), distinct.end());
                const std::size_t k = static_cast<std::size_t>(
                    std::unique(distinct.begin(), distinct.end()) - distinct.begin());
                stats->tokens = P;
                stats->rows_touched = k;
                stats->duplicates = kept - k;
                // kept additions of d values; the one-time zero-fill of a new (V, d) .grad is not counted.
                stats->bytes_written = kept * d * sizeof(real);
            }
            return make_grads(std::move(r));
        }

        // Row-sparse: one coalesced row per distinct index, rows ascending. The lookups are
        // sorted by (row, position), and each row's lookups are summed straight from g into a
        // (k, d) block, in position order. The engine merges it with a sparse gradient held,
        // or adds it into a dense one (a table tied to an output head, nn/tying.hpp).
        std::vector<std::pair<std::int64_t, std::size_t>> lookups;  // (row, position p in g)
        lookups.reserve(P);
        for (std::size_t p = 0; p < P; ++p)
            if (id[p] != pad) lookups.emplace_back(id[p], p);  // every lookup but padding_idx's
        std::sort(lookups.begin(), lookups.end());
        std::vector<std::int64_t> distinct;  // the k rows that appeared, ascending
        for (std::size_t i = 0; i < lookups.size(); ++i)
            if (i == 0 || lookups[i].first != lookups[i - 1].first) distinct.push_back(lookups[i].first);
        if (stats) {
            stats->tokens = P;
            stats->rows_touched = distinct.size();
            stats->duplicates = lookups.size() - distinct.size();
            stats->bytes_written = distinct.size() * (d * sizeof(real) + sizeof(std::int64_t));
        }
        Array values(Shape{distinct.size(), d});
        std::size_t k = 0;    // output rows started so far
        real* out = nullptr;  // the output row being summed
        for (std::size_t i = 0; i < lookups.size(); ++i) {
            const real* src = g.data() + lookups[i].second * d;
            if (i == 0 || lookups[i].first != lookups[i - 1].first) {
                out = values.data() + d * k++;
                std::copy_n(src, d, out);
            } else {  // a repeated row: add to its sum
                for (std::size_t j = 0; j < d; ++j) out[j] += src[j];
            }
        }
        return make_grads(RowSparseGrad{std::move(distinct), std::move(values), /*keep_sparse=*/true});
    });
}

// ---- shared by the classification losses --------------------------------------------------------
namespace {

// Checks logits (..., C) against targets (...) and returns (N, C) with N = targets.numel().
std::pair<std::size_t, std::size_t> class_shapes(const Tensor& logits, const IndexTensor& targets,
                                                 const CrossEntropyOptions& o, const char* op) {
    check_defined(logits, op, "the input");
    check_reduction(o.reduction, op);
    const Shape ls = logits.shape(), ts = targets.shape();
    check(ls.size() >= 2 && ls.size() == ts.size() + 1 && std::equal(ts.begin(), ts.end(), ls.begin()), op,
          "logits {} and targets {} do not match: expected logits (N, C) with targets (N,), "
          "or (B, T, C) with (B, T)",
          lazy_shape(ls), lazy_shape(ts));
    const std::size_t C = ls.back(), N = targets.numel();
    check(C > 0, op, "logits {} have no classes", lazy_shape(ls));
    const std::int64_t* t = targets.data().data();
    for (std::size_t i = 0; i < N; ++i) {
        if (t[i] == o.ignore_index || (t[i] >= 0 && t[i] < static_cast<std::int64_t>(C))) continue;
        throw IndexError(fmt::format("{}: target {} at position {} out of range [0, {}) (ignore_index is {})", op,
                                     t[i], position_str(i, ts), C, o.ignore_index));
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
Array reduce_rows(const std::vector<double>& loss, Reduction r, std::size_t n_valid, const Shape& none_shape) {
    if (r == Reduction::None) {
        Array out(none_shape);
        for (std::size_t i = 0; i < loss.size(); ++i) out.data()[i] = static_cast<real>(loss[i]);
        return out;
    }
    double total = 0;
    for (double l : loss) total += l;
    if (r == Reduction::Mean) total = n_valid == 0 ? 0.0 : total / static_cast<double>(n_valid);
    Array out = xt::zeros<real>(Shape{});
    out() = static_cast<real>(total);
    return out;
}

}  // namespace

// ---- cross_entropy (fused log-softmax + NLL) ---------------------------------------------------
// For row i with logits x (C,), target t and smoothing ε, with the max-subtracted log-sum-exp
//   m = max_c x_c,   lse = m + log Σ_c e^(x_c - m)              (every exponent ≤ 0)
//   log p_c = x_c - lse
//   q_c = (1 - ε)·[c = t] + ε / C                                   (the smoothed target)
//   loss_i = -Σ_c q_c log p_c = (1 - ε)(lse - x_t) + ε (lse - mean_c x_c)
// backward: dL/dx_c = s_i · (p_c - q_c),  s_i = g / N_valid (mean), g (sum) or g_i (none)
// Fused because the composed form would compute log(softmax) and lose precision for large
// logits; here logits of 1e4 stay finite, and a -inf (masked) logit has p_c = 0 and, without
// smoothing, a gradient of exactly 0. Ignored targets give loss 0 and gradient 0.
// ref: PyTorch docs, torch.nn.functional.cross_entropy (label smoothing: Szegedy et al. 2016)
namespace {

// The max of one row of C values, with four independent running values. With a single one,
// every step waits for the one before (a dependent chain of C compares); on the short rows of
// a small model, (32, 27) logits in bench/ workload W1, this and the row sums of sum_double
// (core/ops.hpp), which works the same way, took cross_entropy's forward from 2.3 to 1.75 µs.
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
    check(o.label_smoothing >= 0 && o.label_smoothing <= 1, op, "label_smoothing {} outside [0, 1]",
          o.label_smoothing);
    const auto [N, C] = class_shapes(logits, targets, o, op);
    const real* x = logits.data().data();
    const std::int64_t* t = targets.data().data();
    const double eps = o.label_smoothing;

    // Two passes over the (N, C) logits. Pass 1 stores x - m and exponentiates the whole array
    // at once (xt::exp is vectorised; std::exp on each element, twice, was 12% of a small training
    // step, bench/ workload W1). Pass 2 sums each row in double, giving lse, the loss and
    // p_c = e^(x_c - m) / Σ_c' e^(x_c' - m)  (= e^(x_c - lse)).
    Array probs(Shape{N, C});  // softmax, saved for the backward
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
        if (t[i] == o.ignore_index) continue;
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
    return make_result(reduce_rows(loss, o.reduction, n_valid, targets.shape()), op, {logits},
                       [probs = std::move(probs), targets, o, N = N, C = C, n_valid, shape = logits.shape()](
                           const Array& g, const Array&) {
                           Array dx(shape);
                           const std::int64_t* t = targets.data().data();
                           const double eps = o.label_smoothing;
                           for (std::size_t i = 0; i < N; ++i) {
                               real* dxi = dx.data() + i * C;
                               if (t[i] == o.ignore_index) {
                                   std::fill(dxi, dxi + C, real(0));
                                   continue;
                               }
                               // s · (p_c − ε/C) for every class, then − s·(1 − ε) at the target:
                               // a branch-free row the compiler vectorises
                               const double s = row_scale(g, o.reduction, i, n_valid);
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
    check(o.label_smoothing == 0, op, "label_smoothing is not supported; got {}", o.label_smoothing);
    const auto [N, C] = class_shapes(log_probs, targets, o, op);
    const real* lp = log_probs.data().data();
    const std::int64_t* t = targets.data().data();
    std::vector<double> loss(N, 0.0);
    std::size_t n_valid = 0;
    for (std::size_t i = 0; i < N; ++i) {
        if (t[i] == o.ignore_index) continue;
        ++n_valid;
        loss[i] = -double(lp[i * C + std::size_t(t[i])]);
    }
    return make_result(reduce_rows(loss, o.reduction, n_valid, targets.shape()), op, {log_probs},
                       [targets, o, N = N, C = C, n_valid, shape = log_probs.shape()](const Array& g, const Array&) {
                           Array dx = xt::zeros<real>(shape);
                           const std::int64_t* t = targets.data().data();
                           for (std::size_t i = 0; i < N; ++i)
                               if (t[i] != o.ignore_index)
                                   dx.data()[i * C + std::size_t(t[i])] = -row_scale(g, o.reduction, i, n_valid);
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
// Targets must lie in [0, 1]: anything else (class IDs passed as floats, a nan) gives a loss
// without meaning, possibly negative, so it throws. The mean of no elements is 0. At x = ±∞
// the formula would give ∞ - ∞ = nan; the limit is used instead (PyTorch gives nan there).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction) {
    const char* op = "binary_cross_entropy_with_logits";
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
              y[i], position_str(i, targets.shape()));
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
    return make_result(reduce_rows(loss, reduction, n, logits.shape()), op, {logits},
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
