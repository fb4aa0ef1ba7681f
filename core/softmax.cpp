// core/softmax.cpp — softmax along a dim: the lesson first, then the fast kernel.
//   1. softmax_composed (max, sub, exp, sum, div; no backward of its own) and log_softmax,
//      composed the same way: the lesson, and the oracle of the kernel.
//   2. softmax, fused: each row one pass with no temporaries; the backward needs only y.
// tests/core/test_softmax.cpp ("fused softmax equals softmax_composed") holds them equal along
// every dim; tests/core/gradcheck_softmax.cpp gradchecks both.
// Legend: x any shape, viewed around `dim` as (outer, n, inner): a "row" is the n values
// x[o, :, j] that one softmax normalises, `inner` apart in memory (adjacent when dim is the
// last dim, the common case: attention weights over the keys, (B, H, T, T)).
#include <xgrad/core/softmax.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/detail/simd.hpp>

namespace xgrad {

// ==== the composed forms: the lesson, and the oracle of the fused softmax below ====================

namespace {

// x - c, c = max along dim (detached). A tensor with no elements has no max to take, and nothing
// to shift: x itself (dim is still checked, by sum).
Tensor minus_row_max(const Tensor& x, int dim) { return x.numel() == 0 ? x : x - max(x, dim, true).detach(); }

}  // namespace

// ---- softmax_composed ----------------------------------------------------------------------------
// softmax(x)_i = e^(x_i - c) / Σ_j e^(x_j - c),   c = max_j x_j (detached)
// Composed from exp, sum and div: no backward of its own; c is detached, as its gradient
// contributions cancel exactly. The oracle of the fused softmax below.
// ref: PyTorch docs, torch.nn.functional.softmax
Tensor softmax_composed(const Tensor& x, int dim) {
    const Tensor shifted = minus_row_max(x, dim);
    const Tensor e = exp(shifted);
    return e / sum(e, dim, true);
}

// ---- log_softmax ---------------------------------------------------------------------------------
// log_softmax(x)_i = (x_i - c) - log Σ_j e^(x_j - c)     (the log-sum-exp trick)
// ref: PyTorch docs, torch.nn.functional.log_softmax
Tensor log_softmax(const Tensor& x, int dim) {
    const Tensor shifted = minus_row_max(x, dim);
    return shifted - log(sum(exp(shifted), dim, true));
}

// ==== the fused kernel ==============================================================================

namespace {

// The least number of `outer` slices handed to a second thread: about 16384 values.
std::size_t grain_rows(std::size_t values_per_slice) {
    return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(values_per_slice, 1));
}

}  // namespace

// ---- softmax (fused) -----------------------------------------------------------------------------
// forward : y_i = e^(x_i - c) / Σ_j e^(x_j - c),   c = max_j x_j      (along dim; y: x's shape)
//           (c cancels, but keeps exponents ≤ 0: large logits stay finite, -inf gives 0)
// backward: dL/dx_i = y_i (g_i − Σ_k g_k y_k)       (only y is saved)
//           from ∂y_k/∂x_i = y_k (δ_ki − y_i): Σ_k g_k y_k (δ_ki − y_i) = y_i g_i − y_i Σ_k g_k y_k.
//           Where y_i = 0 (a -inf entry) the gradient is exactly 0, as in the composed form.
// ref: PyTorch docs, torch.nn.functional.softmax; PyTorch's _softmax_backward_data
Tensor softmax(const Tensor& x, int dim) {
    const profiler::OpScope scope("softmax", x);
    const ArrayShape xs = array_shape(x.data());
    const std::size_t d = normalize_dim(dim, xs.size(), "softmax");
    std::size_t outer = 1, inner = 1;
    for (std::size_t k = 0; k < d; ++k) outer *= xs[k];
    for (std::size_t k = d + 1; k < xs.size(); ++k) inner *= xs[k];
    const std::size_t n = xs[d];

    Array y(xs);
    const real* px = x.data().data();
    // Rows split over the threads by `outer`, each whole on one thread: thread-count independent.
    // An empty dim (n = 0) has no rows, and its empty arrays no data to point into: no loop at all.
    const std::size_t grain = grain_rows(n * inner);
    const std::size_t slices = n == 0 ? 0 : outer;
    parallel_for(slices, grain, [&](std::size_t o0, std::size_t o1) {
        for (std::size_t o = o0; o < o1; ++o)
            for (std::size_t j = 0; j < inner; ++j)  // row (o, :, j) starts at o·n·inner + j
                softmax_row(px + o * n * inner + j, y.data() + o * n * inner + j, n, inner);
    });

    return make_result(std::move(y), "softmax", {x},
                       [slices, n, inner, grain](const Array& grad_out, const Array& y) {
        // in the forward pass this was: y = e^(x - c) / Σ e^(x - c); now dL/dx = y ⊙ (g − Σ g⊙y)
        Array dx(y.shape());
        parallel_for(slices, grain, [&](std::size_t o0, std::size_t o1) {
            for (std::size_t o = o0; o < o1; ++o)
                for (std::size_t j = 0; j < inner; ++j) {
                    const std::size_t off = o * n * inner + j;
                    softmax_backward_row(y.data() + off, grad_out.data() + off, dx.data() + off, n, inner);
                }
        });
        return make_grads(std::move(dx));
    });
}

// ---- the row kernels: one row of n values, `stride` apart (1: vectorised) -----------------------
// Sums run in real, as PyTorch's CPU kernel.
using simd::Batch;
using simd::W;

// e_i = e^(x_i - c); the sum is ≥ 1, as the max's own term is e^0
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

    // y_i = e_i · (1 / Σ e): one division per row
    const real inv = real(1) / total;
    i = 0;
    if (stride == 1) {
        const Batch ib(inv);
        for (; i + W <= n; i += W) simd::store(simd::load(y + i) * ib, y + i);
    }
    for (; i < n; ++i) y[i * stride] *= inv;
}

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

}  // namespace xgrad
