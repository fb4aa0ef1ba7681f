// nn/positional.cpp — learned, sinusoidal and rotary positions (overview and legend in
// nn/positional.hpp).
#include <xgrad/nn/positional.hpp>

#include <cmath>
#include <cstdint>
#include <vector>


#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad::nn {

// ---- learned ---------------------------------------------------------------------------------------
namespace {

// max_len, once LearnedPositions has checked both sizes in its own words (before Embedding does).
std::int64_t checked_max_len(std::int64_t max_len, std::int64_t d) {
    check(max_len > 0 && d > 0, "LearnedPositions", "max_len and d must be positive; got ({}, {})", max_len, d);
    check(std::uint64_t(d) <= kMaxNumel / std::uint64_t(max_len), "LearnedPositions",
          "a ({}, {}) table is too large: more than 2^60 elements", max_len, d);
    return max_len;
}

}  // namespace

LearnedPositions::LearnedPositions(std::int64_t max_len, std::int64_t d) : Embedding(checked_max_len(max_len, d), d) {}

Tensor LearnedPositions::forward(std::int64_t T) const {
    check(T >= 0 && T <= max_len(), "LearnedPositions",
          "sequence length T = {} out of range [0, {}]: the table has a row for positions 0 .. {} only", T,
          max_len(), max_len() - 1);
    return Embedding::forward(IndexTensor::arange(T));  // (T, d) = P[0 .. T-1]
}

// ---- sinusoidal -----------------------------------------------------------------------------------
// PE[t, 2i]   = sin(t · ω_i)
// PE[t, 2i+1] = cos(t · ω_i),     ω_i = 10000^(-2i/d) = exp(-(2i/d) · ln 10000)
// Wavelengths 2π .. 10000·2π: low pairs tell near positions apart, high pairs far ones.
// ref: Vaswani et al. 2017, §3.5.
Tensor sinusoidal_positions(std::int64_t T, std::int64_t d) {
    check(T > 0 && d > 0, "sinusoidal_positions", "T and d must be positive; got T = {}, d = {}", T, d);
    check(std::uint64_t(d) <= kMaxNumel / std::uint64_t(T), "sinusoidal_positions",
          "a ({}, {}) table is too large: more than 2^60 elements", T, d);
    Array pe = Array::from_shape({static_cast<std::size_t>(T), static_cast<std::size_t>(d)});
    for (std::int64_t j = 0; j < d; ++j) {
        const std::int64_t i = j / 2;  // the pair column j belongs to
        const double omega = std::exp(-(2.0 * double(i) / double(d)) * std::log(10000.0));
        for (std::int64_t t = 0; t < T; ++t) {
            const double angle = double(t) * omega;
            pe(t, j) = static_cast<real>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    }
    return from_array(std::move(pe));
}

// ---- rotary (RoPE) ----------------------------------------------------------------------------------
// forward : for each pair i and position t, with a = pos[t] · base^(-2i/hd):
//             [y_2i  ]   [cos a  −sin a] [x_2i  ]
//             [y_2i+1] = [sin a   cos a] [x_2i+1]            y = R(a) x
// backward: a rotation is orthogonal, R(a)ᵀ = R(−a), so dL/dx = R(−a) dL/dy
// x, y, g: (..., T, hd); cos a and sin a: (T, hd/2), saved for the backward.
// ref: Su et al. 2021, RoFormer, §3.4.2; facebookresearch/llama model.py, apply_rotary_emb.
Tensor apply_rotary(const Tensor& x, const IndexTensor& positions, double base) {
    const char* op = "apply_rotary";
    const profiler::OpScope scope(op, x);
    check(x.defined() && x.dim() >= 2, op, "x must be (..., T, hd); got {}",
          x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
    const ArrayShape xs = array_shape(x.data());
    const std::size_t T = xs[xs.size() - 2], hd = xs.back(), half = hd / 2;
    check(hd % 2 == 0, op, "x of shape {} has an odd head width hd = {}; RoPE rotates pairs (2i, 2i+1)",
          shape_str(xs), hd);
    check(positions.dim() == 1 && positions.numel() == std::int64_t(T), op,
          "positions of shape {} must be (T,) = ({},) for x of shape {}", shape_str(positions.shape()), T,
          shape_str(xs));
    check(std::isfinite(base) && base > 0, op, "base must be finite and > 0; got {}", base);
    const std::int64_t* pos = positions.data().data();
    for (std::size_t t = 0; t < T; ++t)
        check_index(pos[t] >= 0, op, "position {} at index {} is negative; positions count from 0", pos[t], t);

    // cos a, sin a (T, hd/2), a[t, i] = pos[t] · base^(-2i/hd), in double.
    Array cos_a = Array::from_shape({T, half}), sin_a = Array::from_shape({T, half});
    for (std::size_t i = 0; i < half; ++i) {
        const double theta = std::pow(base, -2.0 * double(i) / double(hd));  // θ_i
        for (std::size_t t = 0; t < T; ++t) {
            const double a = double(pos[t]) * theta;
            cos_a(t, i) = static_cast<real>(std::cos(a));
            sin_a(t, i) = static_cast<real>(std::sin(a));
        }
    }

    // R rows of (T, hd): R = product of the leading dims (B·H for (B, H, T, hd)).
    std::size_t R = 1;
    for (std::size_t k = 0; k + 2 < xs.size(); ++k) R *= xs[k];
    // y = R(a) x, or with sign = -1, y = R(-a) x (the backward). One loop for both directions.
    auto rotate = [R, T, half](const Array& src, const Array& c, const Array& s, real sign, Array& dst) {
        const real* in = src.data();
        real* out = dst.data();
        for (std::size_t r = 0; r < R; ++r) {
            for (std::size_t t = 0; t < T; ++t) {
                const std::size_t row = (r * T + t) * 2 * half;
                const real* ct = c.data() + t * half;
                const real* st = s.data() + t * half;
                for (std::size_t i = 0; i < half; ++i) {
                    const real x0 = in[row + 2 * i], x1 = in[row + 2 * i + 1];
                    const real sn = sign * st[i];
                    out[row + 2 * i] = x0 * ct[i] - x1 * sn;
                    out[row + 2 * i + 1] = x0 * sn + x1 * ct[i];
                }
            }
        }
    };
    Array y = Array::from_shape(xs);
    rotate(x.data(), cos_a, sin_a, real(1), y);  // y = R(a) x
    return make_result(std::move(y), op, {x},
                       [rotate, cos_a = std::move(cos_a), sin_a = std::move(sin_a)](const Array& grad_out, const Array&) {
                           // forward was: y = R(a) x;  so dL/dx = R(a)ᵀ grad_out = R(−a) grad_out
                           Array dx = Array::from_shape(grad_out.shape());
                           rotate(grad_out, cos_a, sin_a, real(-1), dx);
                           return make_grads(std::move(dx));
                       });
}

}  // namespace xgrad::nn
