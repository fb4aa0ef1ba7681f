// core/math_ops.cpp — square roots and the variance: sqrt, rsqrt, var; the piecewise functions
// abs, clamp, minimum, maximum.
//
// The pieces of normalisation, x̂ = (x - mean) · rsqrt(var + eps), each with its own backward.
// Shape legend: x input, y output, g = dL/dy ("grad_out"); N = x.shape[dim] for var.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <xtensor/xmath.hpp>

#include <xgrad/core/detail/op_helpers.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/math_ops.hpp>

namespace xgrad {

// ---- sqrt ------------------------------------------------------------------------------------------
// forward : y = √x                      x: any shape, y: same shape
// backward: dL/dx = g / (2y)            (y is the saved output; inf at x = 0, as in PyTorch)
// ref: PyTorch docs, torch.sqrt; d√x/dx = 1 / (2√x)
Tensor sqrt(const Tensor& x) {
    const profiler::OpScope scope("sqrt", x);
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
    const profiler::OpScope scope("rsqrt", x);
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
    const profiler::OpScope scope("var", x);
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

// ==== piecewise ======================================================================================

// ---- abs ---------------------------------------------------------------------------------------------
// forward : y = |x|                     x: any shape, y: same shape
// backward: dL/dx = sign(x) · g         sign(0) = 0: the subgradient PyTorch picks at the kink
// ref: PyTorch docs, torch.abs; derivatives.yaml, abs: grad * self.sgn()
Tensor abs(const Tensor& x) {
    const profiler::OpScope scope("abs", x);
    Array y = xt::abs(x.data());
    return make_result(std::move(y), "abs", {x}, [x](const Array& g, const Array&) {
        const Array& X = x.data();
        Array sign = xt::where(xt::greater(X, real(0)), real(1), xt::where(xt::less(X, real(0)), real(-1), real(0)));
        return make_grads(Array(sign * g));
    });
}

// ---- clamp -------------------------------------------------------------------------------------------
// forward : y = min(max(x, lo), hi)     x: any shape, y: same shape; an absent bound is ±inf
//           (max first, then min: with lo > hi every y is hi, as torch.clamp; NaN stays NaN)
// backward: dL/dx = g where lo <= x <= hi, else 0    (1 at the bounds themselves; 0 at NaN)
// ref: PyTorch docs, torch.clamp; clamp_backward (FunctionsManual.cpp)
Tensor clamp(const Tensor& x, std::optional<real> min, std::optional<real> max) {
    const profiler::OpScope scope("clamp", x);
    check(min.has_value() || max.has_value(), "clamp", "at least one of min and max must be given");
    check(!(min && std::isnan(*min)), "clamp", "min is nan; a bound must not be NaN");
    check(!(max && std::isnan(*max)), "clamp", "max is nan; a bound must not be NaN");
    const real lo = min.value_or(-std::numeric_limits<real>::infinity());
    const real hi = max.value_or(std::numeric_limits<real>::infinity());
    Array y(x.data().shape());
    const real* px = x.data().data();
    for (std::size_t i = 0; i < y.size(); ++i) {
        const real v = px[i] < lo ? lo : px[i];  // NaN < lo is false: NaN passes through both
        y.data()[i] = v > hi ? hi : v;
    }
    return make_result(std::move(y), "clamp", {x}, [x, lo, hi](const Array& g, const Array&) {
        const Array& X = x.data();
        return make_grads(Array(xt::where(xt::greater_equal(X, lo) && xt::less_equal(X, hi), g, real(0))));
    });
}

Tensor clamp_min(const Tensor& x, real min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, real max) { return clamp(x, std::nullopt, max); }

// ---- minimum / maximum -------------------------------------------------------------------------------
// forward : y = max(a, b) (maximum) or min(a, b) (minimum)    a, b broadcast to y's shape
//           NaN in either operand gives NaN
// backward (maximum; minimum swaps < and >):
//           dL/da = sum_to(g where a > b, g/2 where a = b, 0 where a < b,  a.shape)
//           dL/db = sum_to(g where b > a, g/2 where a = b, 0 where b < a,  b.shape)
//           where a or b is NaN no comparison holds, and both get g.
// ref: PyTorch docs, torch.maximum / torch.minimum; derivatives.yaml:
//      self: at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)
static Tensor min_or_max(const Tensor& a, const Tensor& b, bool is_max, const char* op) {
    const profiler::OpScope scope(op, a, b);
    check_broadcastable(a, b, op);
    const Array& A = a.data();
    const Array& B = b.data();
    // the winner is a where it beats b or is NaN; otherwise b (b's NaN then comes through)
    Array y = is_max ? Array(xt::where(xt::greater(A, B) || xt::isnan(A), A, B))
                     : Array(xt::where(xt::less(A, B) || xt::isnan(A), A, B));
    return make_result(std::move(y), op, {a, b}, [a, b, is_max](const Array& g, const Array&) {
        const Array& A = a.data();
        const Array& B = b.data();
        Array shared = xt::where(xt::equal(A, B), g / real(2), g);  // g, halved at a tie
        Array ga = is_max ? Array(xt::where(xt::less(A, B), real(0), shared))
                          : Array(xt::where(xt::greater(A, B), real(0), shared));
        Array gb = is_max ? Array(xt::where(xt::greater(A, B), real(0), shared))
                          : Array(xt::where(xt::less(A, B), real(0), shared));
        return make_grads(sum_to(std::move(ga), array_shape(A)), sum_to(std::move(gb), array_shape(B)));
    });
}

Tensor maximum(const Tensor& a, const Tensor& b) { return min_or_max(a, b, true, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return min_or_max(a, b, false, "minimum"); }

}  // namespace xgrad
