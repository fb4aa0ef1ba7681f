// core/elementwise.cpp — the elementwise ops: add sub mul div neg (broadcasting), their scalar
// variants, and the pointwise functions pow exp log tanh relu sigmoid.
//
// Legend: a, b, x inputs; y the output; g = dL/dy ("grad_out"), y's shape. Binary ops broadcast
// as in NumPy/PyTorch, and sum_to sums each operand's gradient back to that operand's shape.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xreducer.hpp>

#include <xgrad/core/detail/op_helpers.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad {

// ==== helpers ======================================================================================

Array sum_to(Array grad, const ArrayShape& shape) {
    if (array_shape(grad) == shape) return grad;  // moved out: no copy when nothing was broadcast
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


void check_broadcastable(const Tensor& a, const Tensor& b, const char* op) {
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
    const profiler::OpScope scope("add", a, b);
    check_broadcastable(a, b, "add");
    Array y;
    if (a.data().shape() == b.data().shape()) {  // a residual connection: no broadcast, over the threads
        y = Array(a.data().shape());
        const real *pa = a.data().data(), *pb = b.data().data();
        real* py = y.data();
        parallel_for_values(y.size(), [&](std::size_t i0, std::size_t i1) {
            for (std::size_t i = i0; i < i1; ++i) py[i] = pa[i] + pb[i];
        });
    } else {
        y = a.data() + b.data();
    }
    return make_result(std::move(y), "add", {a, b},
                       [sa = array_shape(a.data()), sb = array_shape(b.data())](const Array& g, const Array&) {
                           return make_grads(sum_to(g, sa), sum_to(g, sb));
                       });
}

// ---- sub -----------------------------------------------------------------------------------------
// forward : y = a - b
// backward: dL/da = sum_to(g, a.shape)      dL/db = -sum_to(g, b.shape)
Tensor sub(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("sub", a, b);
    check_broadcastable(a, b, "sub");
    Array y = a.data() - b.data();
    return make_result(std::move(y), "sub", {a, b},
                       [sa = array_shape(a.data()), sb = array_shape(b.data())](const Array& g, const Array&) {
                           Array gb = -sum_to(g, sb);
                           return make_grads(sum_to(g, sa), std::move(gb));
                       });
}

// ---- mul -----------------------------------------------------------------------------------------
// forward : y = a ⊙ b
// backward: dL/da = sum_to(g ⊙ b, a.shape)  dL/db = sum_to(g ⊙ a, b.shape)
Tensor mul(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("mul", a, b);
    check_broadcastable(a, b, "mul");
    Array y = a.data() * b.data();
    return make_result(std::move(y), "mul", {a, b},
                       [a, b, ra = a.requires_grad(), rb = b.requires_grad()](const Array& g, const Array&) {
                           Grads out(2);
                           if (ra) out[0] = sum_to(Array(g * b.data()), array_shape(a.data()));
                           if (rb) out[1] = sum_to(Array(g * a.data()), array_shape(b.data()));
                           return out;
                       });
}

// ---- div -----------------------------------------------------------------------------------------
// forward : y = a / b
// backward: dL/da = sum_to(g / b, a.shape)  dL/db = sum_to(-g ⊙ a / b², b.shape)
Tensor div(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("div", a, b);
    check_broadcastable(a, b, "div");
    Array y = a.data() / b.data();
    return make_result(std::move(y), "div", {a, b},
                       [a, b, ra = a.requires_grad(), rb = b.requires_grad()](const Array& g, const Array&) {
                           const Array& A = a.data();
                           const Array& B = b.data();
                           Grads out(2);
                           if (ra) out[0] = sum_to(Array(g / B), array_shape(a.data()));
                           if (rb) out[1] = sum_to(Array(-g * A / (B * B)), array_shape(b.data()));
                           return out;
                       });
}

// ---- neg -----------------------------------------------------------------------------------------
// forward : y = -a          backward: dL/da = -g
Tensor neg(const Tensor& a) {
    const profiler::OpScope scope("neg", a);
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
    const profiler::OpScope scope("add_scalar", a);
    Array y = a.data() + s;
    return make_result(std::move(y), "add_scalar", {a},
                       [](const Array& g, const Array&) { return make_grads(g); });
}

Tensor mul(const Tensor& a, real s) {
    const profiler::OpScope scope("mul_scalar", a);
    Array y = a.data() * s;
    return make_result(std::move(y), "mul_scalar", {a},
                       [s](const Array& g, const Array&) { return make_grads(Array(g * s)); });
}

Tensor rsub(real s, const Tensor& a) {
    const profiler::OpScope scope("rsub_scalar", a);
    Array y = s - a.data();
    return make_result(std::move(y), "rsub_scalar", {a},
                       [](const Array& g, const Array&) { return make_grads(Array(-g)); });
}

Tensor rdiv(real s, const Tensor& a) {
    const profiler::OpScope scope("rdiv_scalar", a);
    Array y = s / a.data();
    return make_result(std::move(y), "rdiv_scalar", {a},
                       [a = a.data()](const Array& g, const Array& y) {
                           return make_grads(Array(-g * y / a));
                       });
}

// ==== pointwise ======================================================================================

// ---- pow -----------------------------------------------------------------------------------------
// forward : y = x^p                         p a scalar
// backward: dL/dx = g · p · x^(p-1), and 0 for p = 0 (else 0 · inf = NaN at x = 0)
// ref: power rule; PyTorch's pow_backward masks p = 0 the same way
// A plain std::pow loop: xsimd's pow trips a GCC 12 -Wuninitialized false positive (GCC bug 105593).
static Array pow_elementwise(const Array& x, real p) {
    Array y(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) y.data()[i] = std::pow(x.data()[i], p);
    return y;
}

Tensor pow(const Tensor& x, real p) {
    const profiler::OpScope scope("pow", x);
    return make_result(pow_elementwise(x.data(), p), "pow", {x},
                       [x = x.data(), p](const Array& g, const Array&) {
                           if (p == 0) return make_grads(Array(xt::zeros<real>(x.shape())));
                           return make_grads(Array(g * p * pow_elementwise(x, p - 1)));
                       });
}

// ---- exp -----------------------------------------------------------------------------------------
// forward : y = e^x         backward: dL/dx = g · y        (y is the output; x is not saved)
Tensor exp(const Tensor& x) {
    const profiler::OpScope scope("exp", x);
    Array y = xt::exp(x.data());
    return make_result(std::move(y), "exp", {x},
                       [](const Array& g, const Array& y) { return make_grads(Array(g * y)); });
}

// ---- log -----------------------------------------------------------------------------------------
// forward : y = ln x        backward: dL/dx = g / x
Tensor log(const Tensor& x) {
    const profiler::OpScope scope("log", x);
    Array y = xt::log(x.data());
    return make_result(std::move(y), "log", {x}, [x = x.data()](const Array& g, const Array&) {
        return make_grads(Array(g / x));
    });
}

// ---- tanh ----------------------------------------------------------------------------------------
// forward : y = tanh(x)     backward: dL/dx = g · (1 - y²)
// ref: PyTorch docs, torch.tanh; d/dx tanh x = 1 - tanh² x
// float32: Eigen's rational approximation tanh x ≈ x·p(x²) / q(x²), x clamped to [-9, 9] (where
// tanh rounds to ±1), a couple of ulp, vectorisable; NaN stays NaN. The double build uses xt::tanh.
// ref: Eigen, generic_fast_tanh_float (MathFunctionsImpl.h)
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
    const profiler::OpScope scope("tanh", x);
    Array y(x.data().shape());
    if constexpr (std::is_same_v<real, float>) {
        const real* px = x.data().data();
        parallel_for_values(y.size(), [&](std::size_t i0, std::size_t i1) { tanh_rational(px + i0, y.data() + i0, i1 - i0); });
    } else {
        xt::noalias(y) = xt::tanh(x.data());
    }
    return make_result(std::move(y), "tanh", {x}, [](const Array& g, const Array& y) {
        Array gx(y.shape());  // a plain loop over pointers, which the compiler vectorises
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
    const profiler::OpScope scope("relu", x);
    Array y = xt::where(x.data() <= real(0), real(0), x.data());
    return make_result(std::move(y), "relu", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(xt::where(y <= real(0), real(0), g)));
    });
}

// ---- sigmoid -------------------------------------------------------------------------------------
// forward : y = 1 / (1 + e^-x)   backward: dL/dx = g · y · (1 - y)
// Computed as e^x / (1 + e^x) for x < 0 so that neither branch overflows.
Tensor sigmoid(const Tensor& x) {
    const profiler::OpScope scope("sigmoid", x);
    const Array& xd = x.data();
    Array y = xt::where(xd >= 0, 1 / (1 + xt::exp(-xd)), xt::exp(xd) / (1 + xt::exp(xd)));
    return make_result(std::move(y), "sigmoid", {x}, [](const Array& g, const Array& y) {
        return make_grads(Array(g * y * (1 - y)));
    });
}

}  // namespace xgrad
