// core/softmax.cpp — softmax as one fused op: forward and backward over whole rows.
//
// Legend: x any shape, viewed around `dim` as (outer, n, inner): a "row" is the n values
// x[o, :, j] that one softmax normalises, `inner` apart in memory (adjacent when dim is the
// last dim, the common case: attention weights over the keys, (B, H, T, T)).
//
// Oracle: softmax_composed (max, sub, exp, sum, div: the lesson); softmax here
// computes the same function. tests/test_ops.cpp ("fused softmax equals softmax_composed")
// holds them equal, values and gradients along every dim; tests/test_gradcheck_core.cpp
// gradchecks both. softmax(x, dim) is the only softmax the library runs, so every caller
// (nn/attention.cpp's composed attention among them) gets this kernel.
// Why fused: each of the composed form's five ops allocates a full-size array, and its
// broadcasting sub and div run through strided loops. Here one pass per row does the forward,
// and the backward needs only the saved y, never x.
#include "core/softmax.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

#include "core/autograd.hpp"
#include "core/elementwise.hpp"
#include "core/reduction.hpp"
#include "core/shape.hpp"
#include "core/softmax.hpp"
#include "core/parallel.hpp"
#include "core/simd.hpp"

namespace xgrad {

using simd::Batch;
using simd::W;

// One row of n values, `stride` apart (1: contiguous, vectorised; otherwise a plain loop).
// Sums run in real over W lanes: a row is at most a vocabulary long, and PyTorch's CPU
// kernel accumulates in float too.

// y = softmax(x) on one row: c = max_i x_i, e_i = e^(x_i - c), y_i = e_i / Σ_j e_j
// (the sum is ≥ 1: the max's own term is e^0)
void softmax_row(const real* x, real* y, std::size_t n, std::size_t stride) {
    std::size_t i = 0;
    real c = -std::numeric_limits<real>::infinity();
    if (stride == 1 && n >= W) {
        Batch mb = simd::load(x);
        for (i = W; i + W <= n; i += W) mb = xsimd::max(mb, simd::load(x + i));
        alignas(64) real lanes[W];
        mb.store_aligned(lanes);
        for (real v : lanes) c = v > c ? v : c;
    }
    for (; i < n; ++i) c = x[i * stride] > c ? x[i * stride] : c;

    real total = 0;
    i = 0;
    if (stride == 1) {
        const Batch cb(c);
        Batch sb(real(0));
        for (; i + W <= n; i += W) {
            const Batch e = xsimd::exp(simd::load(x + i) - cb);
            simd::store(e, y + i);
            sb += e;
        }
        total = xsimd::hadd(sb);
    }
    for (; i < n; ++i) {
        y[i * stride] = std::exp(x[i * stride] - c);
        total += y[i * stride];
    }

    // y_i = e_i · (1 / Σ e): one division per row instead of one per value (a division is slow)
    const real inv = real(1) / total;
    i = 0;
    if (stride == 1) {
        const Batch ib(inv);
        for (; i + W <= n; i += W) simd::store(simd::load(y + i) * ib, y + i);
    }
    for (; i < n; ++i) y[i * stride] *= inv;
}

// dx = y ⊙ (g − Σ_k g_k y_k) on one row
void softmax_backward_row(const real* y, const real* g, real* dx, std::size_t n, std::size_t stride) {
    std::size_t i = 0;
    real dot = 0;
    if (stride == 1) {
        Batch db(real(0));
        for (; i + W <= n; i += W) db += simd::load(g + i) * simd::load(y + i);
        dot = xsimd::hadd(db);
    }
    for (; i < n; ++i) dot += g[i * stride] * y[i * stride];

    i = 0;
    if (stride == 1) {
        const Batch dotb(dot);
        for (; i + W <= n; i += W) {
            const Batch yb = simd::load(y + i);
            simd::store(yb * (simd::load(g + i) - dotb), dx + i);
        }
    }
    for (; i < n; ++i) dx[i * stride] = y[i * stride] * (g[i * stride] - dot);
}

namespace {

// The least number of `outer` slices handed to a second thread of the pool: about 16384 values,
// enough work to outweigh waking a worker.
std::size_t grain_rows(std::size_t values_per_slice) {
    return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(values_per_slice, 1));
}

}  // namespace

// ---- softmax (fused) -----------------------------------------------------------------------------
// forward : y_i = e^(x_i - c) / Σ_j e^(x_j - c),   c = max_j x_j      (along dim; y: x's shape)
//           c cancels; it keeps every exponent ≤ 0, so logits of 1e4 stay finite and a -inf
//           (masked) entry gets e^-inf = 0.
// backward: dL/dx_i = y_i (g_i − Σ_k g_k y_k)       (only y is saved)
//           from ∂y_k/∂x_i = y_k (δ_ki − y_i): Σ_k g_k y_k (δ_ki − y_i) = y_i g_i − y_i Σ_k g_k y_k.
//           Where y_i = 0 (a -inf entry) the gradient is exactly 0, as in the composed form.
// ref: PyTorch docs, torch.nn.functional.softmax; PyTorch's _softmax_backward_data
Tensor softmax(const Tensor& x, int dim) {
    const Shape xs = x.shape();
    const std::size_t d = normalize_dim(dim, xs.size(), "softmax");
    std::size_t outer = 1, inner = 1;
    for (std::size_t k = 0; k < d; ++k) outer *= xs[k];
    for (std::size_t k = d + 1; k < xs.size(); ++k) inner *= xs[k];
    const std::size_t n = xs[d];

    Array y(xs);
    const real* px = x.data().data();
    // Rows are independent: split over the threads of core/parallel.hpp by `outer`, each row
    // computed whole by one thread, so the result does not depend on the thread count.
    const std::size_t grain = grain_rows(n * inner);
    parallel_for(outer, grain, [&](std::size_t o0, std::size_t o1) {
        for (std::size_t o = o0; o < o1; ++o)
            for (std::size_t j = 0; j < inner; ++j)  // row (o, :, j) starts at o·n·inner + j
                softmax_row(px + o * n * inner + j, y.data() + o * n * inner + j, n, inner);
    });

    return make_result(std::move(y), "softmax", {x},
                       [outer, n, inner, grain](const Array& grad_out, const Array& y) {
        // in the forward pass this was: y = e^(x - c) / Σ e^(x - c); now dL/dx = y ⊙ (g − Σ g⊙y)
        Array dx(y.shape());
        parallel_for(outer, grain, [&](std::size_t o0, std::size_t o1) {
            for (std::size_t o = o0; o < o1; ++o)
                for (std::size_t j = 0; j < inner; ++j) {
                    const std::size_t off = o * n * inner + j;
                    softmax_backward_row(y.data() + off, grad_out.data() + off, dx.data() + off, n, inner);
                }
        });
        return make_grads(std::move(dx));
    });
}

}  // namespace xgrad

// ==== the composed forms: the lesson, and the oracle of the fused softmax above ====================
namespace xgrad {

// ==== softmax family ==================================================================================

// ---- softmax_composed ----------------------------------------------------------------------------
// softmax(x)_i = e^(x_i - c) / Σ_j e^(x_j - c),   c = max_j x_j (detached)
// Subtracting the row max changes nothing mathematically (it cancels), but keeps every
// exponent ≤ 0: finite for logits of 1e4 and more, and e^(-inf) = 0 for masked entries.
// Composed from exp, sum and div, so it needs no backward of its own; c is detached
// because its gradient contributions cancel exactly. This is the oracle: softmax itself is
// the fused op in core/softmax.cpp, tested against this one.
// ref: PyTorch docs, torch.nn.functional.softmax
Tensor softmax_composed(const Tensor& x, int dim) {
    const Tensor shifted = x - max(x, dim, true).detach();
    const Tensor e = exp(shifted);
    return e / sum(e, dim, true);
}

// ---- log_softmax ---------------------------------------------------------------------------------
// log_softmax(x)_i = (x_i - c) - log Σ_j e^(x_j - c)     (the log-sum-exp trick)
// ref: PyTorch docs, torch.nn.functional.log_softmax
Tensor log_softmax(const Tensor& x, int dim) {
    const Tensor shifted = x - max(x, dim, true).detach();
    return shifted - log(sum(exp(shifted), dim, true));
}

}  // namespace xgrad
