// core/math_ops.cpp — square roots and the variance: sqrt, rsqrt, var.
//
// The pieces of normalisation, x̂ = (x - mean) · rsqrt(var + eps), each with its own backward.
// Shape legend: x input, y output, g = dL/dy ("grad_out"); N = x.shape[dim] for var.
#include <algorithm>
#include <cmath>

#include <xtensor/xmath.hpp>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/math_ops.hpp>

namespace xgrad {

// ---- sqrt ------------------------------------------------------------------------------------------
// forward : y = √x                      x: any shape, y: same shape
// backward: dL/dx = g / (2y)            (y is the saved output; inf at x = 0, as in PyTorch)
// ref: PyTorch docs, torch.sqrt; d√x/dx = 1 / (2√x)
Tensor sqrt(const Tensor& x) {
    Array y = xt::sqrt(x.data());
    return make_result(std::move(y), "sqrt", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(g / (real(2) * y)));
    });
}

// ---- rsqrt -----------------------------------------------------------------------------------------
// forward : y = 1/√x = x^(-1/2)         x: any shape, y: same shape
// backward: dL/dx = g · (-1/2) x^(-3/2) = -g · y³ / 2
// ref: PyTorch docs, torch.rsqrt; power rule
Tensor rsqrt(const Tensor& x) {
    Array y = real(1) / xt::sqrt(x.data());
    return make_result(std::move(y), "rsqrt", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(real(-0.5) * g * y * y * y));
    });
}

// ---- var (dim) -------------------------------------------------------------------------------------
// forward : mean = Σ_i x_i / N;   y = Σ_i (x_i - mean)² / D,   D = N - 1 if unbiased else N
//           x (..., N, ...)  ->  y (..., ...)  (or (..., 1, ...) with keepdim)
//           Two passes in double (one-pass Σx² - N·mean² cancels when |mean| >> std).
//           D = max(N - 1, 0) as in PyTorch: D = 0 gives 0/0 = NaN, as torch does.
// backward: dL/dx_i = g · 2 (x_i - mean) / D      (the term through mean vanishes: Σ_j (x_j - mean) = 0)
// ref: PyTorch docs, torch.var (argument `unbiased`, Bessel's correction).
Tensor var(const Tensor& x, int dim, bool keepdim, bool unbiased) {
    const ArrayShape xs = array_shape(x.data());
    check(!xs.empty(), "var", "needs a dim to reduce; x is 0-d");
    const std::size_t d = normalize_dim(dim, xs.size(), "var");
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < d; ++i) outer *= xs[i];
    for (std::size_t i = d + 1; i < xs.size(); ++i) inner *= xs[i];
    const std::size_t n = xs[d];
    const double divisor = std::max(static_cast<double>(n) - (unbiased ? 1.0 : 0.0), 0.0);  // D

    ArrayShape kept = xs;  // the keepdim shape (..., 1, ...), which broadcasts against x
    kept[d] = 1;
    Array mean(kept), y(kept);
    const real* px = x.data().data();
    for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t j = 0; j < inner; ++j) {
            const real* col = px + o * n * inner + j;  // x[o, :, j], stride `inner`
            double s = 0;
            for (std::size_t i = 0; i < n; ++i) s += col[i * inner];
            const double m = s / static_cast<double>(n);
            double ss = 0;
            for (std::size_t i = 0; i < n; ++i) ss += (col[i * inner] - m) * (col[i * inner] - m);
            mean.data()[o * inner + j] = static_cast<real>(m);
            y.data()[o * inner + j] = static_cast<real>(ss / divisor);
        }
    if (!keepdim) {
        ArrayShape reduced = xs;
        reduced.erase(reduced.begin() + static_cast<std::ptrdiff_t>(d));
        y.reshape(reduced);
    }
    return make_result(std::move(y), "var", {x}, [x, mean = std::move(mean), kept, divisor](const Array& g, const Array&) {
        // in the forward pass this was: y = Σ_i (x_i - mean)² / D; so dL/dx_i = g · 2 (x_i - mean) / D
        Array gk = g;
        gk.reshape(kept);
        return make_grads(Array(gk * (real(2) / static_cast<real>(divisor)) * (x.data() - mean)));
    });
}

}  // namespace xgrad
