// nn/activation.cpp — GELU, forward and backward, computed with SIMD vectors.
//
// Legend: x any shape, n = x.numel(); a "batch" is one SIMD register of W values of type real
// (xsimd::batch<real>: W = 8 floats or 4 doubles with AVX2).
//
// Why vectors: the first GELU here called the scalar double std::erfc once per element in the
// forward and again in the backward; in a transformer block's training step that was about 30%
// of the time. xsimd's erfc and exp (Debian libxsimd-dev, the library under xtensor) evaluate
// W elements at once with a polynomial, in the precision of real.
#include "nn/activation.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "core/autograd.hpp"

namespace xgrad::nn {

namespace {

using Batch = xsimd::batch<real>;
constexpr std::size_t W = Batch::size;

// Loads values [i, i + W) of p (n values in all); past the end, the lanes are 0.
Batch load(const real* p, std::size_t i, std::size_t n) {
    if (i + W <= n) return Batch::load_unaligned(p + i);
    alignas(64) real buf[W] = {};
    std::copy(p + i, p + n, buf);
    return Batch::load_aligned(buf);
}

// Stores the lanes of b that fall before n into p[i, ...).
void store(const Batch& b, real* p, std::size_t i, std::size_t n) {
    if (i + W <= n) return b.store_unaligned(p + i);
    alignas(64) real buf[W];
    b.store_aligned(buf);
    std::copy(buf, buf + (n - i), p + i);
}

const Batch kZero(real(0)), kHalf(real(0.5)), kOne(real(1));

// ---- the exact form: y = x·Φ(x) ------------------------------------------------------------------
// Φ(x) = ½ erfc(-x/√2). The same value as ½ (1 + erf(x/√2)), but for x < -8 that sum cancels to
// 0 (1 + erf rounds to 0), while erfc(+large) = e^(-z²)·(polynomial) keeps its relative accuracy.
Batch normal_cdf(const Batch& x) {
    const Batch inv_sqrt2(real(0.70710678118654752440));  // 1/√2
    return kHalf * xsimd::erfc(-x * inv_sqrt2);
}

// y = x Φ(x); at x = -∞ the product -∞ · 0 would be nan: its limit, 0, is used.
Batch gelu_none(const Batch& x) {
    const Batch y = x * normal_cdf(x);
    return xsimd::select(xsimd::isinf(x) && x < kZero, kZero, y);
}

// dy/dx = Φ(x) + x φ(x),   φ(x) = e^(-x²/2) / √(2π)
// x φ(x) → 0 as x → ±∞; at ±∞ itself the product would be ∞ · 0 = nan, so the limit is used.
Batch gelu_none_grad(const Batch& x) {
    const Batch inv_sqrt_2pi(real(0.39894228040143267794));  // 1/√(2π)
    const Batch x_pdf = x * inv_sqrt_2pi * xsimd::exp(-kHalf * x * x);
    return normal_cdf(x) + xsimd::select(xsimd::isinf(x), kZero, x_pdf);
}

// ---- the tanh form -------------------------------------------------------------------------------
//   u = √(2/π) (x + c x³),  c = 0.044715,   t = tanh(u),   y = ½ x (1 + t)
//   dy/dx = ½ (1 + t) + ½ x (1 - t²) · √(2/π) (1 + 3c x²)          (d tanh(u)/du = 1 - t²)
// For |x| > 20, 1 - t² < 1e-250 (exactly 0 in float): y is x or 0 and dy/dx is 1 or 0 to all
// digits. Those values are used there directly, which also avoids -∞·0 and 0·∞ = nan at ±∞ and
// where x³ overflows.
const Batch kSqrt2OverPi(real(0.79788456080286535588));  // √(2/π)
const Batch kC(real(0.044715));
const Batch kFar(real(20));

Batch gelu_tanh(const Batch& x) {
    const Batch t = xsimd::tanh(kSqrt2OverPi * (x + kC * x * x * x));
    const Batch y = kHalf * x * (kOne + t);
    return xsimd::select(xsimd::abs(x) > kFar, xsimd::max(x, kZero), y);
}

Batch gelu_tanh_grad(const Batch& x) {
    const Batch x2 = x * x;
    const Batch t = xsimd::tanh(kSqrt2OverPi * (x + kC * x2 * x));
    const Batch dy = kHalf * (kOne + t) + kHalf * x * (kOne - t * t) * kSqrt2OverPi * (kOne + Batch(real(3)) * kC * x2);
    return xsimd::select(xsimd::abs(x) > kFar, xsimd::select(x > kZero, kOne, kZero), dy);
}

void check_approximate(const std::string& approximate, const char* op) {
    check(approximate == "none" || approximate == "tanh", op,
          "approximate must be \"none\" or \"tanh\"; got \"{}\"", approximate);
}

}  // namespace

// ---- gelu ------------------------------------------------------------------------------------------
// forward : y = x Φ(x)                          ("none")
//           y = ½ x (1 + tanh(√(2/π)(x + 0.044715 x³)))   ("tanh")
// backward: dL/dx = grad_out · dy/dx, with dy/dx recomputed from the saved x (formulas above)
//           x: any shape, y and dL/dx: the same shape
// ref: Hendrycks & Gimpel 2016, "Gaussian Error Linear Units"; PyTorch docs, torch.nn.GELU
namespace functional {

Tensor gelu(const Tensor& x, const std::string& approximate) {
    check(x.defined(), "gelu", "the input is an undefined tensor");
    check_approximate(approximate, "gelu");
    const bool exact = approximate == "none";
    const Array& xd = x.data();
    const std::size_t n = xd.size();
    Array y(xd.shape());
    for (std::size_t i = 0; i < n; i += W) {
        const Batch v = load(xd.data(), i, n);
        store(exact ? gelu_none(v) : gelu_tanh(v), y.data(), i, n);
    }
    return make_result(std::move(y), "gelu", {x}, [x, exact](const Array& grad_out, const Array&) {
        // in the forward pass this was: y = gelu(x); now dL/dx = grad_out · gelu'(x)
        const Array& xd = x.data();
        const std::size_t n = xd.size();
        Array dx(xd.shape());
        for (std::size_t i = 0; i < n; i += W) {
            const Batch v = load(xd.data(), i, n);
            const Batch g = load(grad_out.data(), i, n);
            store(g * (exact ? gelu_none_grad(v) : gelu_tanh_grad(v)), dx.data(), i, n);
        }
        return make_grads(std::move(dx));
    });
}

}  // namespace functional

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
    check_approximate(approximate_, "GELU");
}

}  // namespace xgrad::nn
