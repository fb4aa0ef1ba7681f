// core/masking.cpp — masks: masked_fill, tril / triu (comparisons that make masks: core/comparison.cpp).
//
// Causal attention hides the future (-inf above the diagonal of scores (B, H, T, T)):
//     Tensor causal = triu(ones({T, T}), 1);                     // (T, T), 1 above the diagonal
//     Tensor masked = masked_fill(scores, causal, -inf);          // (B, H, T, T)
// A mask is a Tensor of `real` whose nonzero entries mean True (no bool dtype); no gradient.
// Shape legend: x input, y output, g = dL/dy ("grad_out"); (R, C) the last two dims of tril/triu.
#include <cmath>
#include <optional>

#include <xtensor/xoperation.hpp>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/masking.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad {

// ---- masked_fill -----------------------------------------------------------------------------------
// forward : y = value where mask != 0, else x       x (...), mask broadcasts to x's shape, y x's shape
// backward: dL/dx = g where mask == 0, else 0       (a filled entry no longer depends on x)
// value may be -inf: how attention hides a key. The mask must broadcast to x's shape (as the
// in-place masked_fill_). ref: PyTorch docs, torch.Tensor.masked_fill.
Tensor masked_fill(const Tensor& x, const Tensor& mask, real value) {
    const profiler::OpScope scope("masked_fill", x, mask);
    check(x.defined() && mask.defined(), "masked_fill", "x and mask must be defined tensors");
    const ArrayShape xs = array_shape(x.data()), ms = array_shape(mask.data());
    bool ok = ms.size() <= xs.size();
    for (std::size_t i = 0; ok && i < ms.size(); ++i) {
        const std::size_t xd = xs[xs.size() - ms.size() + i];
        ok = ms[i] == xd || ms[i] == 1;
    }
    check(ok, "masked_fill", "mask of shape {} does not broadcast to x's shape {}", shape_str(ms), shape_str(xs));

    Array y = xt::where(xt::not_equal(mask.data(), real(0)), value, x.data());
    // Anomaly mode's ±inf check is off for an intended infinite fill; only a NaN is refused here.
    std::optional<DetectAnomalyGuard> intended_inf;
    if (anomaly_enabled() && std::isinf(value)) {
        for (std::size_t i = 0; i < y.size(); ++i)
            check(!std::isnan(y.data()[i]), "masked_fill",
                  "anomaly: op 'masked_fill' produced NaN in its forward output of shape {} at flat index {} "
                  "(detect_anomaly is on)", lazy_shape(xs), i);
        intended_inf.emplace(false);
    }
    // The mask is an input without gradient, so its version is checked before the backward reads it.
    return make_result(std::move(y), "masked_fill", {x, mask}, [mask](const Array& g, const Array&) {
        // in the forward pass this was: y = mask ? value : x; so dy/dx = 0 where the mask is set
        Array gx = xt::where(xt::not_equal(mask.data(), real(0)), real(0), g);
        return make_grads(std::move(gx), std::nullopt);
    });
}

// ---- tril / triu -------------------------------------------------------------------------------------
// forward : tril: y[..., i, j] = x[..., i, j] if j - i <= k else 0      x, y (..., R, C)
//           triu: y[..., i, j] = x[..., i, j] if j - i >= k else 0
//           k = 0 is the main diagonal, k > 0 above it, k < 0 below it
// backward: the same mask on g: dL/dx[..., i, j] = g[..., i, j] where kept, else 0
// ref: PyTorch docs, torch.tril / torch.triu (argument `diagonal`).
static Array keep_triangle(const Array& a, std::int64_t k, bool lower) {
    const std::size_t nd = a.dimension();
    const std::size_t rows = a.shape()[nd - 2], cols = a.shape()[nd - 1];
    const std::size_t batches = rows * cols == 0 ? 0 : a.size() / (rows * cols);
    Array out(a.shape());
    for (std::size_t b = 0; b < batches; ++b) {
        const real* pa = a.data() + b * rows * cols;
        real* po = out.data() + b * rows * cols;
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) {
                const std::int64_t diff = static_cast<std::int64_t>(j) - static_cast<std::int64_t>(i);
                const bool keep = lower ? diff <= k : diff >= k;
                po[i * cols + j] = keep ? pa[i * cols + j] : real(0);
            }
    }
    return out;
}

static Tensor triangle(const Tensor& x, std::int64_t k, bool lower, const char* op) {
    const profiler::OpScope scope(op, x);
    check(x.dim() >= 2, op, "needs at least 2 dims (..., R, C), got shape {}", shape_str(x.shape()));
    return make_result(keep_triangle(x.data(), k, lower), op, {x}, [k, lower](const Array& g, const Array&) {
        return make_grads(keep_triangle(g, k, lower));  // the kept entries pass g, the zeroed ones 0
    });
}

Tensor tril(const Tensor& x, std::int64_t k) { return triangle(x, k, /*lower=*/true, "tril"); }
Tensor triu(const Tensor& x, std::int64_t k) { return triangle(x, k, /*lower=*/false, "triu"); }

}  // namespace xgrad
