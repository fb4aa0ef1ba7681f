// core/reduction.cpp — reductions: sum, mean, max (all elements or along one dim), argmax; and
// cumsum, the running sum along a dim.
// Legend: x the input; y the output; g = dL/dy. Along a dim, x is viewed as (outer, n, inner)
// (DimSplit, core/detail/op_helpers.hpp) and y drops the n axis (or keeps it as 1 with keepdim).
#include <algorithm>
#include <cmath>

#include <xgrad/core/detail/op_helpers.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>

#include <xsimd/xsimd.hpp>

namespace xgrad {

// The shape of x reduced along dim: the dim removed, or kept as 1.
static ArrayShape reduced_shape(const ArrayShape& shape, std::size_t dim, bool keepdim) {
    ArrayShape out = shape;
    if (keepdim) out[dim] = 1;
    else out.erase(out.begin() + static_cast<std::ptrdiff_t>(dim));
    return out;
}

// ---- sum (all) -----------------------------------------------------------------------------------
// forward : y = Σ_i x_i                    x: any shape, y: ()
// backward: dL/dx_i = g                    (g broadcast to x's shape)
// Accumulated in double (a float sum stops growing at 2^24) by sum_double: four registers of
// doubles (xsimd::batch<double>, 4 lanes with AVX2), four independent chains, register k summing
// values i + 4k .. i + 4k + 3 of each block of 16, converted on load.
double sum_double(const real* p, std::size_t n) {
    using Doubles = xsimd::batch<double>;
    constexpr std::size_t S = Doubles::size;
    Doubles a0(0.0), a1(0.0), a2(0.0), a3(0.0);
    std::size_t i = 0;
    for (; i + 4 * S <= n; i += 4 * S) {
        a0 += Doubles::load_unaligned(p + i);
        a1 += Doubles::load_unaligned(p + i + S);
        a2 += Doubles::load_unaligned(p + i + 2 * S);
        a3 += Doubles::load_unaligned(p + i + 3 * S);
    }
    double acc = xsimd::hadd((a0 + a1) + (a2 + a3));
    for (; i < n; ++i) acc += p[i];
    return acc;
}

Tensor sum(const Tensor& x) {
    const profiler::OpScope scope("sum", x);
    const double acc = sum_double(x.data().data(), x.numel());
    Array y = xt::zeros<real>(ArrayShape{});
    y() = static_cast<real>(acc);
    return make_result(std::move(y), "sum", {x}, [shape = x.data().shape()](const Array& g, const Array&) {
        Array gx(shape);
        gx.fill(g());
        return make_grads(std::move(gx));
    });
}

// ---- sum (dim) -----------------------------------------------------------------------------------
// forward : y[o, j] = Σ_i x[o, i, j]        x viewed as (outer, n, inner) around dim
// backward: dL/dx[o, i, j] = g[o, j]        (g broadcast back along dim)
Tensor sum(const Tensor& x, int dim, bool keepdim) {
    const profiler::OpScope scope("sum_dim", x);
    const ArrayShape xs = array_shape(x.data());
    const std::size_t d = normalize_dim(dim, xs.size(), "sum");
    const DimSplit s = split_at(xs, d);
    Array y = xt::zeros<real>(reduced_shape(xs, d, keepdim));
    const real* px = x.data().data();
    real* py = y.data();
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t i = 0; i < s.n; ++i)
            for (std::size_t j = 0; j < s.inner; ++j) py[o * s.inner + j] += px[(o * s.n + i) * s.inner + j];
    return make_result(std::move(y), "sum_dim", {x}, [xs, s](const Array& g, const Array&) {
        Array gx(xs);
        for (std::size_t o = 0; o < s.outer; ++o)
            for (std::size_t i = 0; i < s.n; ++i)
                std::copy_n(g.data() + o * s.inner, s.inner, gx.data() + (o * s.n + i) * s.inner);
        return make_grads(std::move(gx));
    });
}

// ---- mean ----------------------------------------------------------------------------------------
// forward : y = sum(x) / n                  backward: dL/dx = g / n   (through sum and mul)
Tensor mean(const Tensor& x) {
    check(x.numel() > 0, "mean", "mean of an empty tensor of shape {}", shape_str(x.shape()));
    return mul(sum(x), real(1) / static_cast<real>(x.numel()));
}

Tensor mean(const Tensor& x, int dim, bool keepdim) {
    const std::size_t d = normalize_dim(dim, x.dim(), "mean");
    check(x.shape()[d] > 0, "mean", "mean over an empty dim {} of shape {}", dim, shape_str(x.shape()));
    return mul(sum(x, dim, keepdim), real(1) / static_cast<real>(x.shape()[d]));
}

// ---- max (all) -----------------------------------------------------------------------------------
// forward : y = max_i x_i                   backward: dL/dx_k = g at the first maximal k, else 0
// NaN is larger than every number and the first NaN wins: max([1, NaN, 3]) = NaN, as PyTorch.
static bool beats(real v, real best) { return !std::isnan(best) && (v > best || std::isnan(v)); }

Tensor max(const Tensor& x) {
    const profiler::OpScope scope("max", x);
    check(x.numel() > 0, "max", "max of an empty tensor of shape {}", shape_str(x.shape()));
    const real* px = x.data().data();
    std::size_t k = 0;
    for (std::size_t i = 1; i < x.data().size(); ++i) k = beats(px[i], px[k]) ? i : k;
    Array y = xt::zeros<real>(ArrayShape{});
    y() = px[k];
    return make_result(std::move(y), "max", {x}, [shape = x.data().shape(), k](const Array& g, const Array&) {
        Array gx = xt::zeros<real>(shape);
        gx.data()[k] = g();
        return make_grads(std::move(gx));
    });
}

// ---- max (dim) / argmax --------------------------------------------------------------------------
// forward : y[o, j] = max_i x[o, i, j],  a[o, j] = the first such i
// backward: dL/dx[o, a[o, j], j] = g[o, j], all other entries 0
static IndexArray argmax_flat(const Array& x, std::size_t d, const DimSplit& s, bool keepdim) {
    IndexArray arg = xt::zeros<std::int64_t>(reduced_shape(array_shape(x), d, keepdim));
    const real* px = x.data();
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t j = 0; j < s.inner; ++j) {
            std::size_t best = 0;
            for (std::size_t i = 1; i < s.n; ++i)
                if (beats(px[(o * s.n + i) * s.inner + j], px[(o * s.n + best) * s.inner + j])) best = i;
            arg.data()[o * s.inner + j] = static_cast<std::int64_t>(best);
        }
    return arg;
}

IndexTensor argmax(const Tensor& x, int dim, bool keepdim) {
    const std::size_t d = normalize_dim(dim, x.dim(), "argmax");
    check(x.shape()[d] > 0, "argmax", "argmax over an empty dim {} of shape {}", dim, shape_str(x.shape()));
    return IndexTensor(argmax_flat(x.data(), d, split_at(array_shape(x.data()), d), keepdim));
}

Tensor max(const Tensor& x, int dim, bool keepdim) {
    const profiler::OpScope scope("max_dim", x);
    const ArrayShape xs = array_shape(x.data());
    const std::size_t d = normalize_dim(dim, xs.size(), "max");
    check(xs[d] > 0, "max", "max over an empty dim {} of shape {}", dim, shape_str(xs));
    const DimSplit s = split_at(xs, d);
    IndexArray arg = argmax_flat(x.data(), d, s, keepdim);
    Array y(reduced_shape(xs, d, keepdim));
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t j = 0; j < s.inner; ++j) {
            const auto i = static_cast<std::size_t>(arg.data()[o * s.inner + j]);
            y.data()[o * s.inner + j] = x.data().data()[(o * s.n + i) * s.inner + j];
        }
    return make_result(std::move(y), "max_dim", {x},
                       [xs, s, arg = std::move(arg)](const Array& g, const Array&) {
                           Array gx = xt::zeros<real>(xs);
                           for (std::size_t o = 0; o < s.outer; ++o)
                               for (std::size_t j = 0; j < s.inner; ++j) {
                                   const auto i = static_cast<std::size_t>(arg.data()[o * s.inner + j]);
                                   gx.data()[(o * s.n + i) * s.inner + j] = g.data()[o * s.inner + j];
                               }
                           return make_grads(std::move(gx));
                       });
}

// ---- cumsum ---------------------------------------------------------------------------------------
// forward : y[o, i, j] = Σ_{k <= i} x[o, k, j]         x viewed as (outer, n, inner), y: x's shape
// backward: dL/dx[o, k, j] = Σ_{i >= k} g[o, i, j]     each x_k feeds every y_i with i >= k: the
//           cumulative sum of g taken from the end, the reverse of the forward
// ref: PyTorch docs, torch.cumsum; derivatives.yaml, cumsum_backward (a reversed cumsum of grad)
static Array running_sum(const Array& x, const DimSplit& s, bool from_end) {
    Array y(x.shape());
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t j = 0; j < s.inner; ++j) {
            double acc = 0;  // in double, as PyTorch's CPU kernel (its accumulate type)
            for (std::size_t step = 0; step < s.n; ++step) {
                const std::size_t i = from_end ? s.n - 1 - step : step;
                const std::size_t at = (o * s.n + i) * s.inner + j;
                acc += x.data()[at];
                y.data()[at] = static_cast<real>(acc);
            }
        }
    return y;
}

Tensor cumsum(const Tensor& x, int dim) {
    const profiler::OpScope scope("cumsum", x);
    const ArrayShape xs = array_shape(x.data());
    const ArrayShape lines = xs.empty() ? ArrayShape{1} : xs;  // a 0-d x is one line of one element
    check(!xs.empty() || dim == 0 || dim == -1, "cumsum", "dim {} out of range [-1, 0] for a 0-d tensor", dim);
    const DimSplit s = split_at(lines, normalize_dim(dim, lines.size(), "cumsum"));
    return make_result(running_sum(x.data(), s, /*from_end=*/false), "cumsum", {x},
                       [s](const Array& g, const Array&) { return make_grads(running_sum(g, s, /*from_end=*/true)); });
}

}  // namespace xgrad
