// core/ops.cpp — forward and backward of every core op, side by side.
//
// Shape legend: x, a, b are inputs; y is the output; g = dL/dy ("grad_out") has y's shape.
// Each backward returns dL/d(input) for every input, in order (std::nullopt = none).
// The "ref:" line names where the formula comes from.
#include "core/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xreducer.hpp>

#include "core/blas.hpp"
#include "core/parallel.hpp"
#include "core/permute.hpp"

namespace xgrad {

// ==== helpers ======================================================================================

std::size_t normalize_dim(int dim, std::size_t ndim, const char* op) {
    const int n = static_cast<int>(ndim);
    check(dim >= -n && dim < n, op, "dim {} out of range [{}, {}) for a {}-d tensor", dim, -n, n, n);
    return static_cast<std::size_t>(dim < 0 ? dim + n : dim);
}

static Shape shape_of(const Array& a) { return Shape(a.shape().begin(), a.shape().end()); }

Array sum_to(Array grad, const Shape& shape) {
    if (shape_of(grad) == shape) return grad;  // moved out: no copy when nothing was broadcast
    if (grad.size() == 0) return xt::zeros<real>(shape);  // an empty sum (xt::sum of nothing reads null)
    const std::size_t lead = grad.dimension() - shape.size();
    std::vector<std::size_t> axes;
    for (std::size_t i = 0; i < grad.dimension(); ++i) {
        if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1)) axes.push_back(i);
    }
    Array out = xt::sum(grad, axes, xt::evaluation_strategy::immediate);
    out.reshape(shape);
    return out;
}

// View a tensor of `shape` as (outer, n, inner) around `dim`: element (o, i, j) sits at
// flat offset (o·n + i)·inner + j. Reductions and concat loop over this split.
struct DimSplit {
    std::size_t outer = 1, n = 1, inner = 1;
};
static DimSplit split_at(const Shape& shape, std::size_t dim) {
    DimSplit s;
    for (std::size_t i = 0; i < dim; ++i) s.outer *= shape[i];
    s.n = shape[dim];
    for (std::size_t i = dim + 1; i < shape.size(); ++i) s.inner *= shape[i];
    return s;
}

static Shape reduced_shape(const Shape& shape, std::size_t dim, bool keepdim) {
    Shape out = shape;
    if (keepdim) out[dim] = 1;
    else out.erase(out.begin() + static_cast<std::ptrdiff_t>(dim));
    return out;
}

static void check_broadcastable(const Tensor& a, const Tensor& b, const char* op) {
    const auto& sa = a.data().shape();
    const auto& sb = b.data().shape();
    const std::size_t n = std::max(sa.size(), sb.size());
    std::size_t numel = 1;  // of the result's non-zero sizes, bounded as in checked_numel
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t da = i < n - sa.size() ? 1 : sa[i - (n - sa.size())];
        const std::size_t db = i < n - sb.size() ? 1 : sb[i - (n - sb.size())];
        const std::size_t dy = std::max<std::size_t>(da == 1 ? db : da, 1);
        check((da == db || da == 1 || db == 1) && numel <= kMaxNumel / dy, op,
              "shapes {} and {} cannot be broadcast together (or their result exceeds 2^60 elements)",
              lazy_shape(sa), lazy_shape(sb));
        numel *= dy;
    }
}

// ==== elementwise, broadcasting ====================================================================

// ---- add -----------------------------------------------------------------------------------------
// forward : y = a + b                       a, b broadcast to y's shape
// backward: dL/da = sum_to(g, a.shape)      dL/db = sum_to(g, b.shape)
Tensor add(const Tensor& a, const Tensor& b) {
    check_broadcastable(a, b, "add");
    Array y = a.data() + b.data();
    return make_result(std::move(y), "add", {a, b},
                       [sa = a.shape(), sb = b.shape()](const Array& g, const Array&) {
                           return make_grads(sum_to(g, sa), sum_to(g, sb));
                       });
}

// ---- sub -----------------------------------------------------------------------------------------
// forward : y = a - b
// backward: dL/da = sum_to(g, a.shape)      dL/db = -sum_to(g, b.shape)
Tensor sub(const Tensor& a, const Tensor& b) {
    check_broadcastable(a, b, "sub");
    Array y = a.data() - b.data();
    return make_result(std::move(y), "sub", {a, b},
                       [sa = a.shape(), sb = b.shape()](const Array& g, const Array&) {
                           Array gb = -sum_to(g, sb);
                           return make_grads(sum_to(g, sa), std::move(gb));
                       });
}

// ---- mul -----------------------------------------------------------------------------------------
// forward : y = a ⊙ b
// backward: dL/da = sum_to(g ⊙ b, a.shape)  dL/db = sum_to(g ⊙ a, b.shape)
Tensor mul(const Tensor& a, const Tensor& b) {
    check_broadcastable(a, b, "mul");
    Array y = a.data() * b.data();
    // The backward keeps the input handles, not copies of their arrays (as every op here).
    return make_result(std::move(y), "mul", {a, b},
                       [a, b, ra = a.requires_grad(), rb = b.requires_grad()](const Array& g, const Array&) {
                           Grads out(2);
                           if (ra) out[0] = sum_to(Array(g * b.data()), a.shape());
                           if (rb) out[1] = sum_to(Array(g * a.data()), b.shape());
                           return out;
                       });
}

// ---- div -----------------------------------------------------------------------------------------
// forward : y = a / b
// backward: dL/da = sum_to(g / b, a.shape)  dL/db = sum_to(-g ⊙ a / b², b.shape)
Tensor div(const Tensor& a, const Tensor& b) {
    check_broadcastable(a, b, "div");
    Array y = a.data() / b.data();
    return make_result(std::move(y), "div", {a, b},
                       [a, b, ra = a.requires_grad(), rb = b.requires_grad()](const Array& g, const Array&) {
                           const Array& A = a.data();
                           const Array& B = b.data();
                           Grads out(2);
                           if (ra) out[0] = sum_to(Array(g / B), a.shape());
                           if (rb) out[1] = sum_to(Array(-g * A / (B * B)), b.shape());
                           return out;
                       });
}

// ---- neg -----------------------------------------------------------------------------------------
// forward : y = -a          backward: dL/da = -g
Tensor neg(const Tensor& a) {
    Array y = -a.data();
    return make_result(std::move(y), "neg", {a},
                       [](const Array& g, const Array&) { return make_grads(Array(-g)); });
}

// ---- scalar variants -----------------------------------------------------------------------------
// add  : y = a + s    dL/da = g
// mul  : y = a · s    dL/da = g · s
// rsub : y = s - a    dL/da = -g
// rdiv : y = s / a    dL/da = -g · s / a² = -g · y / a
Tensor add(const Tensor& a, real s) {
    Array y = a.data() + s;
    return make_result(std::move(y), "add_scalar", {a},
                       [](const Array& g, const Array&) { return make_grads(g); });
}

Tensor mul(const Tensor& a, real s) {
    Array y = a.data() * s;
    return make_result(std::move(y), "mul_scalar", {a},
                       [s](const Array& g, const Array&) { return make_grads(Array(g * s)); });
}

Tensor rsub(real s, const Tensor& a) {
    Array y = s - a.data();
    return make_result(std::move(y), "rsub_scalar", {a},
                       [](const Array& g, const Array&) { return make_grads(Array(-g)); });
}

Tensor rdiv(real s, const Tensor& a) {
    Array y = s / a.data();
    return make_result(std::move(y), "rdiv_scalar", {a},
                       [a = a.data()](const Array& g, const Array& y) {
                           return make_grads(Array(-g * y / a));
                       });
}

// ==== pointwise ======================================================================================

// ---- pow -----------------------------------------------------------------------------------------
// forward : y = x^p                         p a scalar
// backward: dL/dx = g · p · x^(p-1),  and exactly 0 for p = 0: x^0 is constant, and the
//           formula would give 0 · x^-1 = 0 · inf = NaN at x = 0
// ref: power rule; PyTorch's pow_backward masks p = 0 the same way
// A plain std::pow loop: xsimd's vectorised pow trips GCC 12's -Wuninitialized false
// positive inside its own AVX-512 intrinsics header (GCC bug 105593).
static Array pow_elementwise(const Array& x, real p) {
    Array y(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) y.data()[i] = std::pow(x.data()[i], p);
    return y;
}

Tensor pow(const Tensor& x, real p) {
    return make_result(pow_elementwise(x.data(), p), "pow", {x},
                       [x = x.data(), p](const Array& g, const Array&) {
                           if (p == 0) return make_grads(Array(xt::zeros<real>(x.shape())));
                           return make_grads(Array(g * p * pow_elementwise(x, p - 1)));
                       });
}

// ---- exp -----------------------------------------------------------------------------------------
// forward : y = e^x         backward: dL/dx = g · y        (y is the output; x is not saved)
Tensor exp(const Tensor& x) {
    Array y = xt::exp(x.data());
    return make_result(std::move(y), "exp", {x},
                       [](const Array& g, const Array& y) { return make_grads(Array(g * y)); });
}

// ---- log -----------------------------------------------------------------------------------------
// forward : y = ln x        backward: dL/dx = g / x
Tensor log(const Tensor& x) {
    Array y = xt::log(x.data());
    return make_result(std::move(y), "log", {x}, [x = x.data()](const Array& g, const Array&) {
        return make_grads(Array(g / x));
    });
}

// ---- tanh ----------------------------------------------------------------------------------------
// forward : y = tanh(x)     backward: dL/dx = g · (1 - y²)
// ref: PyTorch docs, torch.tanh; d/dx tanh x = 1 - tanh² x
//
// Fast path for float32: Eigen's rational approximation, tanh x ≈ x·p(x²) / q(x²) with x
// clamped to [-9, 9] (beyond which tanh x rounds to ±1 in float), accurate to a couple of ulp.
// It is a plain loop of multiply-adds and one division that the compiler vectorises; xsimd's
// tanh evaluates both a polynomial and an exp branch per vector and was 11% of a small
// training step (bench/, workload W1). NaN stays NaN (the clamps let it through). The double
// build (gradcheck) keeps xt::tanh. ref: Eigen, generic_fast_tanh_float (MathFunctionsImpl.h)
template <class T>  // called with T = float only
static void tanh_rational(const T* x, T* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const T v = std::min(std::max(x[i], T(-9)), T(9));
        const T v2 = v * v;
        T p = v2 * -2.76076847742355e-16f + 2.00018790482477e-13f;  // odd numerator
        p = v2 * p + -8.60467152213735e-11f;
        p = v2 * p + 5.12229709037114e-08f;
        p = v2 * p + 1.48572235717979e-05f;
        p = v2 * p + 6.37261928875436e-04f;
        p = v2 * p + 4.89352455891786e-03f;
        T q = v2 * 1.19825839466702e-06f + 1.18534705686654e-04f;   // even denominator
        q = v2 * q + 2.26843463243900e-03f;
        q = v2 * q + 4.89352518554385e-03f;
        y[i] = v * p / q;
    }
}

Tensor tanh(const Tensor& x) {
    Array y(x.data().shape());
    if constexpr (std::is_same_v<real, float>) {
        const real* px = x.data().data();
        parallel_for_values(y.size(), [&](std::size_t i0, std::size_t i1) { tanh_rational(px + i0, y.data() + i0, i1 - i0); });
    } else {
        xt::noalias(y) = xt::tanh(x.data());
    }
    return make_result(std::move(y), "tanh", {x}, [](const Array& g, const Array& y) {
        Array gx(y.shape());  // a plain loop: the xtensor expression with the integer 1 was not vectorised
        const real *pg = g.data(), *py = y.data();
        real* pgx = gx.data();
        parallel_for_values(gx.size(), [&](std::size_t i0, std::size_t i1) {
            for (std::size_t i = i0; i < i1; ++i) pgx[i] = pg[i] * (1 - py[i] * py[i]);
        });
        return make_grads(std::move(gx));
    });
}

// ---- relu ----------------------------------------------------------------------------------------
// forward : y = x <= 0 ? 0 : x   backward: dL/dx = y <= 0 ? 0 : g   (0 at x = 0; NaN stays NaN
//           and passes g, as PyTorch's relu and threshold_backward; tests/reference/reliability_nan.py)
Tensor relu(const Tensor& x) {
    Array y = xt::where(x.data() <= real(0), real(0), x.data());
    return make_result(std::move(y), "relu", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(xt::where(y <= real(0), real(0), g)));
    });
}

// ---- sigmoid -------------------------------------------------------------------------------------
// forward : y = 1 / (1 + e^-x)   backward: dL/dx = g · y · (1 - y)
// Computed as e^x / (1 + e^x) for x < 0 so that neither branch overflows.
Tensor sigmoid(const Tensor& x) {
    const Array& xd = x.data();
    Array y = xt::where(xd >= 0, 1 / (1 + xt::exp(-xd)), xt::exp(xd) / (1 + xt::exp(xd)));
    return make_result(std::move(y), "sigmoid", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(g * y * (1 - y)));
    });
}

// ==== reductions =====================================================================================

// ---- sum (all) -----------------------------------------------------------------------------------
// forward : y = Σ_i x_i                    x: any shape, y: ()
// backward: dL/dx_i = g                    (g broadcast to x's shape)
// The sum is accumulated in double: a float accumulator stops growing at 2^24. Eight
// interleaved partial sums let the additions pipeline and vectorise instead of each waiting
// for the one before; walking the xarray with its iterator into a single accumulator took 27%
// of a sparse embedding step (bench/, workload W4).
double sum_double(const real* p, std::size_t n) {
    double lane[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (std::size_t l = 0; l < 8; ++l) lane[l] += p[i + l];
    double acc = 0;
    for (; i < n; ++i) acc += p[i];
    for (double v : lane) acc += v;
    return acc;
}

Tensor sum(const Tensor& x) {
    const double acc = sum_double(x.data().data(), x.numel());
    Array y = xt::zeros<real>(Shape{});
    y() = static_cast<real>(acc);
    return make_result(std::move(y), "sum", {x}, [shape = x.shape()](const Array& g, const Array&) {
        Array gx(shape);
        gx.fill(g());
        return make_grads(std::move(gx));
    });
}

// ---- sum (dim) -----------------------------------------------------------------------------------
// forward : y[o, j] = Σ_i x[o, i, j]        x viewed as (outer, n, inner) around dim
// backward: dL/dx[o, i, j] = g[o, j]        (g broadcast back along dim)
Tensor sum(const Tensor& x, int dim, bool keepdim) {
    const Shape xs = x.shape();
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
// (PyTorch's max(dim) also routes the gradient to the one index it returns.) NaN is larger than
// every number, and the first NaN wins: max([1, NaN, 3]) = NaN, as in PyTorch.
static bool beats(real v, real best) { return !std::isnan(best) && (v > best || std::isnan(v)); }

Tensor max(const Tensor& x) {
    check(x.numel() > 0, "max", "max of an empty tensor of shape {}", shape_str(x.shape()));
    const real* px = x.data().data();
    std::size_t k = 0;
    for (std::size_t i = 1; i < x.numel(); ++i) k = beats(px[i], px[k]) ? i : k;
    Array y = xt::zeros<real>(Shape{});
    y() = px[k];
    return make_result(std::move(y), "max", {x}, [shape = x.shape(), k](const Array& g, const Array&) {
        Array gx = xt::zeros<real>(shape);
        gx.data()[k] = g();
        return make_grads(std::move(gx));
    });
}

// ---- max (dim) / argmax --------------------------------------------------------------------------
// forward : y[o, j] = max_i x[o, i, j],  a[o, j] = the first such i
// backward: dL/dx[o, a[o, j], j] = g[o, j], all other entries 0
static IndexArray argmax_flat(const Array& x, std::size_t d, const DimSplit& s, bool keepdim) {
    IndexArray arg = xt::zeros<std::int64_t>(reduced_shape(shape_of(x), d, keepdim));
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
    return IndexTensor(argmax_flat(x.data(), d, split_at(x.shape(), d), keepdim));
}

Tensor max(const Tensor& x, int dim, bool keepdim) {
    const Shape xs = x.shape();
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

// ==== shape ==========================================================================================

// ---- reshape / view ------------------------------------------------------------------------------
// forward : y = x with a new shape of the same numel (one entry may be -1: inferred)
// backward: dL/dx = g reshaped back to x's shape
// Unlike PyTorch's view, the result owns a copy of the data (xgrad never aliases storage).
Tensor reshape(const Tensor& x, const Dims& dims) {
    const std::size_t numel = x.numel();
    Shape shape(dims.size(), 1);  // an inferred (-1) size stays 1 until it is known
    int infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1) {
            check(infer < 0, "reshape", "only one dim can be -1 in {}", lazy_shape(dims));
            infer = static_cast<int>(i);
        } else {
            check(dims[i] >= 0, "reshape", "invalid size {} in {}", dims[i], lazy_shape(dims));
            shape[i] = static_cast<std::size_t>(dims[i]);
        }
    }
    std::size_t known = checked_numel(shape, "reshape");  // product of the given sizes
    if (infer >= 0) {
        check(known > 0 && numel % known == 0, "reshape", "cannot infer -1 in {} for {} elements of shape {}",
              lazy_shape(dims), numel, lazy_shape(x.shape()));
        shape[static_cast<std::size_t>(infer)] = numel / known;
        known *= shape[static_cast<std::size_t>(infer)];
    }
    check(known == numel, "reshape", "cannot reshape {} ({} elements) to {}", lazy_shape(x.shape()),
          numel, lazy_shape(dims));
    Array y = x.data();
    y.reshape(shape);
    return make_result(std::move(y), "reshape", {x}, [xs = x.shape()](const Array& g, const Array&) {
        Array gx = g;
        gx.reshape(xs);
        return make_grads(std::move(gx));
    });
}

// ---- permute / transpose -------------------------------------------------------------------------
// forward : y.shape[i] = x.shape[perm[i]],  y[..i..] = x[..perm⁻¹..]
// backward: dL/dx = permute(g, perm⁻¹)       where perm⁻¹[perm[i]] = i
Tensor permute(const Tensor& x, const std::vector<int>& dims) {
    const std::size_t n = x.dim();
    check(dims.size() == n, "permute", "got {} dims {} for a {}-d tensor of shape {}", dims.size(),
          shape_str(dims), n, shape_str(x.shape()));
    std::vector<std::size_t> perm(n), inverse(n, n);
    for (std::size_t i = 0; i < n; ++i) {
        perm[i] = normalize_dim(dims[i], n, "permute");
        check(inverse[perm[i]] == n, "permute", "dims {} repeat dim {}", shape_str(dims), perm[i]);
        inverse[perm[i]] = i;
    }
    Array y = permute_array(x.data(), perm);  // core/permute.cpp: row copies, not xt::transpose
    return make_result(std::move(y), "permute", {x}, [inverse](const Array& g, const Array&) {
        return make_grads(permute_array(g, inverse));
    });
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
    const std::size_t n = x.dim();
    const std::size_t a = normalize_dim(dim0, n, "transpose"), b = normalize_dim(dim1, n, "transpose");
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[a], perm[b]);
    return permute(x, perm);
}

// ---- concat --------------------------------------------------------------------------------------
// forward : y = [x_0 | x_1 | ... ] along dim   all shapes equal except along dim
// backward: dL/dx_k = the slice of g that x_k filled
Tensor concat(const std::vector<Tensor>& xs, int dim) {
    check(!xs.empty(), "concat", "needs at least one tensor");
    const Shape first = xs[0].shape();
    const std::size_t d = normalize_dim(dim, first.size(), "concat");
    Shape ys = first;
    ys[d] = 0;
    for (const auto& t : xs) {
        Shape s = t.shape();
        bool same = s.size() == first.size();
        for (std::size_t i = 0; same && i < s.size(); ++i) same = (i == d || s[i] == first[i]);
        check(same, "concat", "shape {} does not match {} outside dim {}", shape_str(s),
              shape_str(first), d);
        ys[d] += s[d];
    }
    const DimSplit out = split_at(ys, d);
    std::vector<std::size_t> widths;  // each input's row length: n_k · inner
    Array y(ys);
    std::size_t offset = 0;
    for (const auto& t : xs) {
        const std::size_t w = t.shape()[d] * out.inner;
        for (std::size_t o = 0; o < out.outer; ++o)
            std::copy_n(t.data().data() + o * w, w, y.data() + o * out.n * out.inner + offset);
        widths.push_back(w);
        offset += w;
    }
    return make_result(std::move(y), "concat", xs, [out, widths, xs_shapes = [&] {
        std::vector<Shape> v;
        for (const auto& t : xs) v.push_back(t.shape());
        return v;
    }()](const Array& g, const Array&) {
        Grads grads;
        std::size_t off = 0;
        for (std::size_t k = 0; k < widths.size(); ++k) {
            Array gk(xs_shapes[k]);
            for (std::size_t o = 0; o < out.outer; ++o)
                std::copy_n(g.data() + o * out.n * out.inner + off, widths[k], gk.data() + o * widths[k]);
            grads.push_back(std::move(gk));
            off += widths[k];
        }
        return grads;
    });
}

// ==== matmul ==========================================================================================

// ---- matmul --------------------------------------------------------------------------------------
// forward : Y[b] = A[b] @ B[b]           A (..., n, k), B (..., k, m), Y (..., n, m)
//           the batch dims (...) broadcast; a 2-D operand is shared by every batch
// backward: dA[b] = G[b] @ B[b]ᵀ         summed over the batches where A was broadcast
//           dB[b] = A[b]ᵀ @ G[b]         summed over the batches where B was broadcast
// Every product is one BLAS gemm on contiguous buffers, transposes passed as flags (no copy).
// Common case, B 2-D: A's batches fold into rows, so forward and each backward are one gemm:
//           Y (Bn, m) = A (Bn, k) @ B,   dA = G @ Bᵀ,   dB (k, m) = Aᵀ (k, Bn) @ G (Bn, m)
namespace {
struct MatmulPlan {
    std::size_t n, k, m;
    Shape batch;                                     // broadcast batch shape of Y
    std::vector<std::size_t> a_off, b_off;           // per batch: matrix offset into A and B
};

MatmulPlan plan_matmul(const Shape& sa, const Shape& sb) {
    check(sa.size() >= 2 && sb.size() >= 2, "matmul",
          "needs operands of at least 2 dims; got {} and {}", lazy_shape(sa), lazy_shape(sb));
    MatmulPlan p;
    p.n = sa[sa.size() - 2];
    p.k = sa.back();
    p.m = sb.back();
    check(sb[sb.size() - 2] == p.k, "matmul", "inner sizes differ: {} @ {} ({} vs {})", lazy_shape(sa),
          lazy_shape(sb), p.k, sb[sb.size() - 2]);
    const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    const std::size_t r = std::max(ba.size(), bb.size());
    auto dim_of = [r](const Shape& s, std::size_t i) { return i < r - s.size() ? 1 : s[i - (r - s.size())]; };
    p.batch.resize(r);
    for (std::size_t i = 0; i < r; ++i) {
        const std::size_t x = dim_of(ba, i), y = dim_of(bb, i);
        check(x == y || x == 1 || y == 1, "matmul", "batch dims of {} and {} cannot be broadcast",
              lazy_shape(sa), lazy_shape(sb));
        p.batch[i] = x == 1 ? y : x;  // (not max: a 0-size batch broadcast with 1 is 0, as in PyTorch)
    }
    const std::size_t nb = std::accumulate(p.batch.begin(), p.batch.end(), std::size_t{1}, std::multiplies<>());
    p.a_off.resize(nb);
    p.b_off.resize(nb);
    for (std::size_t flat = 0; flat < nb; ++flat) {
        // Unravel `flat` over p.batch; a size-1 operand dim contributes stride 0 (broadcast).
        std::size_t rem = flat, oa = 0, ob = 0, sta = 1, stb = 1;
        for (std::size_t i = r; i-- > 0;) {
            const std::size_t idx = rem % p.batch[i];
            rem /= p.batch[i];
            const std::size_t da = dim_of(ba, i), db = dim_of(bb, i);
            if (da > 1) oa += idx * sta;
            if (db > 1) ob += idx * stb;
            sta *= da;
            stb *= db;
        }
        p.a_off[flat] = oa * p.n * p.k;
        p.b_off[flat] = ob * p.k * p.m;
    }
    return p;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    const Shape sa = a.shape(), sb = b.shape();
    MatmulPlan p = plan_matmul(sa, sb);
    Shape ys = p.batch;
    ys.push_back(p.n);
    ys.push_back(p.m);
    checked_numel(ys, "matmul");
    Array y(ys);
    const std::size_t nb = p.a_off.size();
    const bool b_shared = sb.size() == 2;  // fold A's batches into rows: one gemm
    if (b_shared) {
        gemm(false, false, nb * p.n, p.m, p.k, 1, a.data().data(), p.k, b.data().data(), p.m, 0, y.data(), p.m);
    } else {
        for (std::size_t i = 0; i < nb; ++i)
            gemm(false, false, p.n, p.m, p.k, 1, a.data().data() + p.a_off[i], p.k,
                 b.data().data() + p.b_off[i], p.m, 0, y.data() + i * p.n * p.m, p.m);
    }
    // The backward keeps the input handles (no copies of A and B), and a gemm with beta = 0
    // writes every element of its output, so dA and dB start uninitialised; copies and
    // zero-fills had cost a third of the time raw sgemm needs (bench/, workload W5).
    return make_result(
        std::move(y), "matmul", {a, b},
        [a, b, p = std::move(p), b_shared, ra = a.requires_grad(),
         rb = b.requires_grad()](const Array& g, const Array&) {
            const Array& A = a.data();
            const Array& B = b.data();
            Grads out(2);
            const std::size_t nb = p.a_off.size(), n = p.n, k = p.k, m = p.m;
            if (ra) {
                Array dA(A.shape());
                if (b_shared) {
                    gemm(false, true, nb * n, k, m, 1, g.data(), m, B.data(), m, 0, dA.data(), k);
                } else {
                    dA.fill(0);
                    for (std::size_t i = 0; i < nb; ++i)  // beta = 1: broadcast batches add up
                        gemm(false, true, n, k, m, 1, g.data() + i * n * m, m, B.data() + p.b_off[i], m,
                             1, dA.data() + p.a_off[i], k);
                }
                out[0] = std::move(dA);
            }
            if (rb) {
                Array dB(B.shape());
                if (b_shared) {
                    gemm(true, false, k, m, nb * n, 1, A.data(), k, g.data(), m, 0, dB.data(), m);
                } else {
                    dB.fill(0);
                    for (std::size_t i = 0; i < nb; ++i)
                        gemm(true, false, k, m, n, 1, A.data() + p.a_off[i], k, g.data() + i * n * m, m,
                             1, dB.data() + p.b_off[i], m);
                }
                out[1] = std::move(dB);
            }
            return out;
        });
}

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

// ==== indexing ============================================================================================

void check_ids(const IndexTensor& ids, std::int64_t limit, const char* op) {
    const IndexArray& a = ids.data();
    for (std::size_t f = 0; f < a.size(); ++f) {
        const std::int64_t v = a.data()[f];
        if (v >= 0 && v < limit) continue;
        std::vector<std::size_t> pos(a.dimension());
        std::size_t rem = f;
        for (std::size_t i = a.dimension(); i-- > 0;) {
            pos[i] = rem % a.shape()[i];
            rem /= a.shape()[i];
        }
        throw IndexError(fmt::format("{}: index {} at position {} out of range [0, {})", op, v,
                                     shape_str(pos), limit));
    }
}

// ---- index_select (dim 0): the row gather ----------------------------------------------------
// forward : y[p, :] = src[index[p], :]          src (V, d...), index any shape (P...),
//                                               y (P..., d...)  (PyTorch needs a 1-D index)
// backward: dL/dsrc[r, :] = Σ_{p : index[p] = r} g[p, :]     a row scatter-add
// Only the rows that appeared are touched, and duplicates sum: the backward returns the P rows
// of g with their indices (a RowSparseGrad), which the engine adds into src.grad in O(P·d).
Tensor index_select(const Tensor& src, int dim, const IndexTensor& index) {
    check(src.dim() >= 1, "index_select", "source must have at least 1 dim; got shape {}",
          lazy_shape(src.shape()));
    check(normalize_dim(dim, src.dim(), "index_select") == 0, "index_select",
          "only dim 0 (row gather) is supported; got dim {}", dim);
    const Shape ss = src.shape();
    const auto rows = static_cast<std::int64_t>(ss[0]);
    check_ids(index, rows, "index_select");
    const std::size_t width = src.numel() / std::max<std::size_t>(ss[0], 1);  // d (or d·...)
    Shape ys = index.shape();
    ys.insert(ys.end(), ss.begin() + 1, ss.end());
    Array y(ys);
    const std::int64_t* ids = index.data().data();
    const std::size_t P = index.numel();
    for (std::size_t p = 0; p < P; ++p)
        std::copy_n(src.data().data() + static_cast<std::size_t>(ids[p]) * width, width, y.data() + p * width);

    return make_result(std::move(y), "index_select", {src},
                       [ss, index, width, P](const Array& g, const Array&) -> Grads {
                           // rows (P, d...) = g reshaped; the engine scatter-adds them at `index`
                           Shape rs{P};
                           rs.insert(rs.end(), ss.begin() + 1, ss.end());
                           Array rows(rs);
                           std::copy_n(g.data(), P * width, rows.data());
                           const std::int64_t* ids = index.data().data();
                           return make_grads(RowSparseGrad{std::vector<std::int64_t>(ids, ids + P), std::move(rows)});
                       });
}

// ---- one_hot ---------------------------------------------------------------------------------
// y[p, c] = 1 if ids[p] = c else 0           ids (P...), y (P..., C); no gradient
// The reference path for embeddings: one_hot(ids, V) @ E equals index_select(E, 0, ids),
// at O(P·V·d) multiply-adds instead of O(P·d) copies.
Tensor one_hot(const IndexTensor& ids, std::size_t num_classes) {
    check_ids(ids, static_cast<std::int64_t>(num_classes), "one_hot");
    Shape ys = ids.shape();
    ys.push_back(num_classes);
    checked_numel(ys, "one_hot");
    Array y = xt::zeros<real>(ys);
    for (std::size_t p = 0; p < ids.numel(); ++p)
        y.data()[p * num_classes + static_cast<std::size_t>(ids.data().data()[p])] = 1;
    return from_array(std::move(y));
}

}  // namespace xgrad
