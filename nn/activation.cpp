// nn/activation.cpp — GELU and SiLU, forward and backward, computed with SIMD vectors.
// The math, which the ops gelu and silu at the end of this file compute value by value:
//   gelu(x) = x·Φ(x), Φ the standard normal CDF    gelu'(x) = Φ(x) + x·φ(x)      (exact form)
//   gelu(x) ≈ ½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))                         (tanh form)
//   silu(x) = x·σ(x)                               silu'(x) = σ(x) (1 + x (1 − σ(x)))
// Above the ops, each formula as a kernel over one SIMD register of W values (a Batch,
// core/detail/simd.hpp), with xsimd's exp and tanh and, for Φ, one fitted polynomial. The forward
// pass computes f'(x) beside f(x) and saves it, so the backward is one multiply (pointwise, below).
// Legend: x any shape, n = x.numel(). Oracle: tests/nn/test_activation.cpp checks y and dy/dx on a
// dense grid against double std::erfc and PyTorch, and silu at hand-computed points;
// tests/nn/gradcheck_activation.cpp gradchecks both GELU forms and SiLU.
#include <xgrad/nn/activation.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/detail/simd.hpp>

namespace xgrad::nn {

namespace {

using simd::Batch;
using simd::load;   // tail-safe load(p, i, n), core/detail/simd.hpp
using simd::store;  // tail-safe store(b, p, i, n)
using simd::W;

const Batch kZero(real(0)), kHalf(real(0.5)), kOne(real(1));

// ---- the exact form: y = x·Φ(x) ------------------------------------------------------------------
//   Φ(x) = ½ erfc(-x/√2) the standard normal CDF,   φ(x) = Φ'(x) = e^(-x²/2) / √(2π)
// Φ and φ share one exp. With z = |x|/√2 and e = e^(-z²) = e^(-x²/2):
//   erfc(z) = e · R(z),   R(z) = erfc(z) e^(z²)   (erfcx, a Mills ratio: R(0) = 1, R(z) ~ 1/(√π z))
//   Φ(x) = ½ e R(z) for x < 0,  1 - ½ e R(z) for x ≥ 0
// R is smooth and bounded on [0, ∞), so ONE approximation serves every x (xsimd's float erfc
// switches polynomials at z = 2/3, which a register's lanes would both need):
//   t = 1 / (1 + p z),  p = 0.5,   R(z) ≈ t · P(t),  P of degree 10, fitted for relative error
// (about 3e-7 in float); xgrad_f64 calls xsimd's double erfc. Never forming 1 + erf(x/√2) keeps
// the left tail accurate (gelu(-10) = -7.62e-23). At x = ±∞, t = e = 0: Φ is 0 or 1.
const Batch kMillsP[11] = {  // P(t) = Σ kMillsP[k] tᵏ, from tests/reference/fit_gelu_mills_ratio.py 10 0.5
    Batch(2.820948064e-01f), Batch(2.820938528e-01f),  Batch(2.468805760e-01f), Batch(1.753769666e-01f),
    Batch(9.299967438e-02f), Batch(-5.722896382e-02f), Batch(1.270810813e-01f), Batch(-4.469649792e-01f),
    Batch(4.861676097e-01f), Batch(-2.308520228e-01f), Batch(4.235140234e-02f)};
constexpr double kMillsPOverSqrt2 = 0.5 * 0.70710678118654752440;  // p/√2

struct CdfPdf {
    Batch cdf;  // Φ(x)
    Batch pdf;  // φ(x)
};

[[gnu::always_inline]] inline CdfPdf normal_cdf_pdf(const Batch& x) {
    const Batch inv_sqrt_2pi(real(0.39894228040143267794));  // 1/√(2π)
    const Batch e = xsimd::exp(-(kHalf * (x * x)));  // e^(-x²/2): x·x rounds once, as exp magnifies it
    if constexpr (!std::is_same_v<real, float>) {
        const Batch inv_sqrt2(real(0.70710678118654752440));  // 1/√2
        return {kHalf * xsimd::erfc(-x * inv_sqrt2), e * inv_sqrt_2pi};
    } else {
        // t = 1/(1 + p z), with p z = (p/√2) |x| and 1 + p z rounded once (fma)
        const Batch t = kOne / xsimd::fma(Batch(real(kMillsPOverSqrt2)), xsimd::abs(x), kOne);
        Batch poly = kMillsP[10];  // P(t), Horner: (((c10 t + c9) t + c8) t + ...) t + c0
        for (int k = 9; k >= 0; --k) poly = xsimd::fma(poly, t, kMillsP[k]);
        const Batch tail = kHalf * e * (t * poly);  // Φ(-|x|) = ½ e R(z)
        return {xsimd::select(x < kZero, tail, kOne - tail), e * inv_sqrt_2pi};
    }
}

// y = x Φ(x); at x = -∞ the product -∞ · 0 would be nan: its limit, 0, is used.
[[gnu::always_inline]] inline Batch gelu_none(const Batch& x, const CdfPdf& n) {
    const Batch y = x * n.cdf;
    return xsimd::select(xsimd::isinf(x) && x < kZero, kZero, y);
}

// dy/dx = Φ(x) + x φ(x); at ±∞, x φ(x) is ∞ · 0 = nan, so its limit 0 is used.
[[gnu::always_inline]] inline Batch gelu_none_grad(const Batch& x, const CdfPdf& n) {
    return n.cdf + xsimd::select(xsimd::isinf(x), kZero, x * n.pdf);
}

// ---- the tanh form -------------------------------------------------------------------------------
//   u = √(2/π) (x + c x³),  c = 0.044715,   t = tanh(u),   y = ½ x (1 + t)
//   dy/dx = ½ (1 + t) + ½ x (1 - t²) · √(2/π) (1 + 3c x²)          (d tanh(u)/du = 1 - t²)
// For |x| > 20, 1 - t² is 0 in float: y is x or 0 and dy/dx 1 or 0, used directly (no nan at ±∞).
const Batch kSqrt2OverPi(real(0.79788456080286535588));  // √(2/π)
const Batch kC(real(0.044715));
const Batch kFar(real(20));

[[gnu::always_inline]] inline Batch tanh_of_u(const Batch& x) {
    return xsimd::tanh(kSqrt2OverPi * (x + kC * x * x * x));
}

[[gnu::always_inline]] inline Batch gelu_tanh(const Batch& x, const Batch& t) {
    const Batch y = kHalf * x * (kOne + t);
    return xsimd::select(xsimd::abs(x) > kFar, xsimd::max(x, kZero), y);
}

[[gnu::always_inline]] inline Batch gelu_tanh_grad(const Batch& x, const Batch& t) {
    const Batch du_dx = kSqrt2OverPi * (kOne + Batch(real(3)) * kC * (x * x));
    const Batch dy = kHalf * (kOne + t) + kHalf * x * (kOne - t * t) * du_dx;
    return xsimd::select(xsimd::abs(x) > kFar, xsimd::select(x > kZero, kOne, kZero), dy);
}

// Each form gives f(x) alone (value), or f(x) and f'(x) from one evaluation of what they share
// (value_and_grad): Φ and φ, tanh(u), σ(x).
struct ExactForm {
    [[gnu::always_inline]] static Batch value(const Batch& x) { return gelu_none(x, normal_cdf_pdf(x)); }
    [[gnu::always_inline]] static void value_and_grad(const Batch& x, Batch& y, Batch& dy) {
        const CdfPdf n = normal_cdf_pdf(x);
        y = gelu_none(x, n), dy = gelu_none_grad(x, n);
    }
};
struct TanhForm {
    [[gnu::always_inline]] static Batch value(const Batch& x) { return gelu_tanh(x, tanh_of_u(x)); }
    [[gnu::always_inline]] static void value_and_grad(const Batch& x, Batch& y, Batch& dy) {
        const Batch t = tanh_of_u(x);
        y = gelu_tanh(x, t), dy = gelu_tanh_grad(x, t);
    }
};

// ---- SiLU: y = x·σ(x) ------------------------------------------------------------------------------
// With e = e^(-|x|) in (0, 1] (never overflows), σ(|x|) = 1/(1 + e) and σ(-|x|) = e/(1 + e), so
//   σ(x) = x ≥ 0 ? 1/(1 + e) : e/(1 + e),    1 - σ(x) = σ(-x) = the other one
//   dy/dx = σ(x) · (1 + x · σ(-x))
// At ±∞ the products ∞ · 0 would be nan: the limits (y = x or 0, dy/dx = 1 or 0) are used.
struct Sigmoids {
    Batch pos;  // σ(x)
    Batch neg;  // σ(-x) = 1 - σ(x), without the cancellation of 1 - σ(x)
};

[[gnu::always_inline]] inline Sigmoids sigmoids(const Batch& x) {
    const Batch e = xsimd::exp(-xsimd::abs(x));
    const Batch big = kOne / (kOne + e), small = e / (kOne + e);  // σ(|x|), σ(-|x|)
    const auto nonneg = x >= kZero;
    return {xsimd::select(nonneg, big, small), xsimd::select(nonneg, small, big)};
}

struct SiluForm {
    [[gnu::always_inline]] static Batch value(const Batch& x, const Sigmoids& s) {
        return xsimd::select(xsimd::isinf(x), xsimd::max(x, kZero), x * s.pos);
    }
    [[gnu::always_inline]] static Batch value(const Batch& x) { return value(x, sigmoids(x)); }
    [[gnu::always_inline]] static void value_and_grad(const Batch& x, Batch& y, Batch& dy) {
        const Sigmoids s = sigmoids(x);
        y = value(x, s);
        dy = xsimd::select(xsimd::isinf(x), xsimd::select(x > kZero, kOne, kZero), s.pos * (kOne + x * s.neg));
    }
};

// Registers of W values covering n values, the last one possibly partial.
std::size_t registers(std::size_t n) { return (n + W - 1) / W; }
// The least work, in registers, handed to a second thread of the pool.
constexpr std::size_t kGrain = 1024;

// y = f(x) in whole registers over the threads (thread-count independent); Form inlines.
template <class Form>
void map_values(const real* x, real* y, std::size_t n) {
    parallel_for(registers(n), kGrain, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0 * W; i < std::min(b1 * W, n); i += W) store(Form::value(load(x, i, n)), y, i, n);
    });
}

// y = f(x) and dydx = f'(x) in one pass, the two sharing one exp (and polynomial or tanh).
template <class Form>
void map_values_and_grads(const real* x, real* y, real* dydx, std::size_t n) {
    parallel_for(registers(n), kGrain, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0 * W; i < std::min(b1 * W, n); i += W) {
            Batch yi, di;
            Form::value_and_grad(load(x, i, n), yi, di);
            store(yi, y, i, n);
            store(di, dydx, i, n);
        }
    });
}

// dx = g ⊙ dydx, the backward of every op here once the forward has saved dydx.
void multiply(const real* g, const real* dydx, real* dx, std::size_t n) {
    parallel_for(registers(n), kGrain, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0 * W; i < std::min(b1 * W, n); i += W)
            store(load(g, i, n) * load(dydx, i, n), dx, i, n);
    });
}

// The op y = f(x) with its backward dL/dx = grad_out ⊙ f'(x). When a backward can follow (grad
// mode on, x requiring grad), f'(x) is computed in the forward pass beside f(x), while x is in
// registers, and saved (n values, the size of y): the backward is then one multiply, not a second
// evaluation of exp and the polynomial. Without a backward only y is computed.
template <class Form>
Tensor pointwise(const Tensor& x, const char* name) {
    const profiler::OpScope scope(name, x);
    const Array& xd = x.data();
    const std::size_t n = xd.size();
    Array y(xd.shape());
    if (!(grad_enabled() && x.requires_grad())) {
        map_values<Form>(xd.data(), y.data(), n);
        return make_result(std::move(y), name, {x}, nullptr);  // records no node: none is needed
    }
    Array dydx(xd.shape());
    map_values_and_grads<Form>(xd.data(), y.data(), dydx.data(), n);
    return make_result(std::move(y), name, {x}, [dydx = std::move(dydx)](const Array& grad_out, const Array&) {
        // in the forward pass this was: y = f(x), and f'(x) was saved; now dL/dx = grad_out ⊙ f'(x)
        Array dx(dydx.shape());
        multiply(grad_out.data(), dydx.data(), dx.data(), dydx.size());
        return make_grads(std::move(dx));
    });
}

void check_approximate(const std::string& approximate, const char* op) {
    check(approximate == "none" || approximate == "tanh", op,
          "approximate must be \"none\" or \"tanh\"; got \"{}\"", approximate);
}

}  // namespace

// ---- gelu ------------------------------------------------------------------------------------------
// forward : y = x Φ(x) ("none") or the tanh form (formulas above)     x, y, dL/dx: any shape
// backward: dL/dx = grad_out · dy/dx, dy/dx computed and saved by the forward (pointwise, above)
// ref: Hendrycks & Gimpel 2016, "Gaussian Error Linear Units"; PyTorch docs, torch.nn.GELU
namespace functional {

Tensor gelu(const Tensor& x, const std::string& approximate) {
    check(x.defined(), "gelu", "the input is an undefined tensor");
    check_approximate(approximate, "gelu");
    return approximate == "none" ? pointwise<ExactForm>(x, "gelu") : pointwise<TanhForm>(x, "gelu");
}

// ---- silu ------------------------------------------------------------------------------------------
// forward : y = x σ(x)                                  x, y, dL/dx: any shape
// backward: dL/dx = grad_out · σ(x) (1 + x (1 - σ(x))), the derivative saved by the forward
// ref: Elfwing, Uchibe & Doya 2018, "Sigmoid-Weighted Linear Units"; PyTorch docs, torch.nn.SiLU
Tensor silu(const Tensor& x) {
    check(x.defined(), "silu", "the input is an undefined tensor");
    return pointwise<SiluForm>(x, "silu");
}

}  // namespace functional

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
    check_approximate(approximate_, "GELU");
}

}  // namespace xgrad::nn
