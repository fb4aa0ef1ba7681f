// nn/normalization.cpp — layer norm and RMS norm: the composed forms (the lesson and the oracles),
// then one fused forward and closed-form backward for both, then the LayerNorm and RMSNorm modules.
//
// Oracles: layer_norm_composed and rms_norm_composed (first), whose backward autograd derives;
// tests/nn/test_normalization.cpp ("fused equals composed") and tests/nn/gradcheck_normalization.cpp
// hold them equal. Legend as in nn/normalization.hpp: x (N, D), weight w and bias b (D), mean and rstd (N).
#include <xgrad/nn/normalization.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/math_ops.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/detail/simd.hpp>

namespace xgrad::nn {

namespace {

// Checks the arguments of the four norm functions (bias undefined for RMS norm); returns D.
std::size_t check_norm_args(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                            const Tensor& bias, double eps, const char* op) {
    check(x.defined(), op, "the input is an undefined tensor");
    const Shape xs = x.shape();
    const std::size_t k = normalized_shape.size();
    check(k >= 1, op, "normalized_shape must have at least one dim; got ()");
    check(k <= xs.size() && Shape(xs.end() - k, xs.end()) == normalized_shape, op,
          "normalized_shape {} is not the trailing dims of the input of shape {}", shape_str(normalized_shape),
          shape_str(xs));
    check(!weight.defined() || weight.shape() == normalized_shape, op,
          "weight of shape {} does not match normalized_shape {}", weight.defined() ? shape_str(weight.shape()) : "",
          shape_str(normalized_shape));
    check(!bias.defined() || bias.shape() == normalized_shape, op,
          "bias of shape {} does not match normalized_shape {}", bias.defined() ? shape_str(bias.shape()) : "",
          shape_str(normalized_shape));
    check(eps >= 0, op, "eps must be >= 0; got {}", eps);  // false for NaN too
    std::size_t D = 1;
    for (std::size_t s : normalized_shape) D *= s;
    return D;
}

// x (..., *normalized_shape) viewed as (..., D), k = normalized_shape's length: the composed forms' rows.
Tensor rows_of(const Tensor& x, std::size_t k, std::size_t D) {
    const Shape xs = x.shape();
    Dims rows(xs.begin(), xs.end() - k);  // the leading dims, then D
    rows.push_back(std::int64_t(D));
    return reshape(x, rows);
}

}  // namespace

namespace functional {

// ---- layer_norm_composed and rms_norm_composed (the oracles) ---------------------------------------
// The same math from core ops on x viewed as (..., D); autograd derives the backward:
//   layer norm: xc = x - mean(x, -1),  var = mean(xc², -1),  x̂ = xc · (var + eps)^(-1/2)
//   RMS norm:   ms = mean(x², -1),     x̂ = x · rsqrt(ms + eps)
Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                           const Tensor& bias, double eps) {
    const std::size_t D = check_norm_args(x, normalized_shape, weight, bias, eps, "layer_norm_composed");
    const Tensor xr = rows_of(x, normalized_shape.size(), D);     // (..., D)
    const Tensor xc = xr - mean(xr, -1, /*keepdim=*/true);        // (..., D)
    const Tensor var = mean(xc * xc, -1, /*keepdim=*/true);       // (..., 1), biased
    Tensor y = reshape(xc * pow(var + real(eps), real(-0.5)), x.shape());  // x̂
    if (weight.defined()) y = y * weight;  // broadcasts over the leading dims
    if (bias.defined()) y = y + bias;
    return y;
}

Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                         std::optional<double> eps) {
    const double e = eps.value_or(std::numeric_limits<real>::epsilon());
    const std::size_t D = check_norm_args(x, normalized_shape, weight, Tensor(), e, "rms_norm_composed");
    const Tensor xr = rows_of(x, normalized_shape.size(), D);     // (..., D)
    const Tensor ms = mean(xr * xr, -1, /*keepdim=*/true);        // (..., 1), the mean square
    const Tensor y = reshape(xr * rsqrt(ms + real(e)), x.shape());  // x̂
    return weight.defined() ? y * weight : y;
}

}  // namespace functional

namespace {

// Row loops are written once for V = Batch and V = real (the tail): for_row, core/detail/simd.hpp.
using simd::Batch;
using simd::for_row;
using simd::load;
using simd::store;
using simd::W;

// The least work handed to a second thread: about 16384 values, in rows of D or columns of N.
std::size_t grain_rows(std::size_t D) { return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(D, 1)); }
std::size_t grain_columns(std::size_t N) { return std::max<std::size_t>(1, 16384 / (W * std::max<std::size_t>(N, 1))); }

// Column registers whose sums over the rows the backward keeps in registers at once.
constexpr std::size_t kGroup = 4;

// A sum over a row: W lanes for the vector part, one scalar for the tail.
struct Sum {
    Batch lanes = Batch(real(0));
    real tail = 0;
    void add(const Batch& v) { lanes += v; }
    void add(real v) { tail += v; }
    real total() const { return xsimd::hadd(lanes) + tail; }
};

// ---- the fused kernel of both norms ---------------------------------------------------------------
// Layer norm (center = true), forward, for each row r of x (N, D):
//   mean_r = Σ_j x_rj / D                      (accumulated in double: exact for a constant row)
//   var_r  = Σ_j (x_rj - mean_r)² / D          (second pass: exact 0 for a constant row)
//   rstd_r = 1 / √(var_r + eps)
//   x̂_rj   = (x_rj - mean_r) · rstd_r,    y_rj = x̂_rj · w_j + b_j
//   saved: mean (N), rstd (N); x̂ is recomputed from them in the backward.
// RMS norm (center = false) is the same rows with mean_r taken as 0 and no bias:
//   rstd_r = 1 / √(Σ_j x_rj² / D + eps),    x̂_rj = x_rj · rstd_r,    y_rj = x̂_rj · w_j;  saved: rstd (N).
// Layer norm's backward, with g = dL/dy (N, D) and per row the averages over j
//   dn_j = g_j · w_j                            (the gradient reaching x̂)
//   dL/dx_rj = rstd_r · (dn_j - mean_j(dn) - x̂_rj · mean_j(dn · x̂))
//   dL/dw_j = Σ_r g_rj · x̂_rj,     dL/db_j = Σ_r g_rj
// (x_j moves x̂ directly, through mean: the - mean(dn) term, and through rstd: the - x̂·mean(dn·x̂).)
// ref: Karpathy, llm.c, layernorm_forward / layernorm_backward (train_gpt2.c); PyTorch's
// native layer_norm_backward (aten/src/ATen/native/cpu/layer_norm_kernel.cpp).
// RMS norm's backward, with r = rstd_r, x̂ = x·r and g' = g ⊙ w (the gradient reaching x̂):
//   dL/dx_rj = r · (g'_j - x̂_rj · mean_j(g' ⊙ x̂)),     dL/dw_j = Σ_r g_rj · x̂_rj
// (x_j moves x̂_j directly, r·g'_j, and through r: ∂r/∂x_k = -r³ x_k / D gives the - x̂·mean(g'⊙x̂);
// with no mean there is no - mean(dn) term.) ref: Zhang & Sennrich 2019, their gradient analysis.
// Sums other than the mean are accumulated in real over W lanes, as PyTorch's CPU kernel for float.
// What the backward needs from the forward: mean (N; empty for RMS norm) and rstd (N), and which
// inputs require a gradient.
struct NormSaved {
    Tensor x, weight;
    Shape normalized_shape;
    Array mean, rstd;
    std::size_t N, D;
    bool center, has_w, has_b;
    bool rx, rw, rb;
};

// Forward statistics of one row xr (D): (mean_r, or 0 for RMS norm; rstd_r).
std::pair<real, real> norm_row_statistics(const real* xr, std::size_t D, double eps, bool center) {
    const real m = center ? real(sum_double(xr, D) / double(D)) : real(0);
    Sum ss;
    for_row(0, D, [&](auto v, std::size_t j) {
        using V = decltype(v);
        const V xc = load<V>(xr + j) - V(m);
        ss.add(xc * xc);
    });
    return {m, real(1 / std::sqrt(double(ss.total()) / double(D) + eps))};
}

// The normalised output of one row: x̂ = (x - m)·rs, y = x̂·w + b.
void norm_row_output(const real* xr, real m, real rs, const real* pw, const real* pb, real* yr,
                     std::size_t D) {
    for_row(0, D, [&](auto v, std::size_t j) {
        using V = decltype(v);
        const V xhat = (load<V>(xr + j) - V(m)) * V(rs);
        store(xhat * load<V>(pw + j) + load<V>(pb + j), yr + j);
    });
}

// dL/dx (N, D), rows over the threads, each row whole on one thread.
void norm_backward_x(const NormSaved& s, const real* pw, const real* pg, Array& dx) {
    const real* px = s.x.data().data();
    const std::size_t D = s.D;
    parallel_for(s.N, grain_rows(D), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const real* xr = px + r * D;
            const real* gr = pg + r * D;
            const real m = s.center ? s.mean[r] : real(0), rs = s.rstd[r];
            // in the forward pass this was: x̂ = (x - mean)·rstd, y = x̂·w + b; so dL/dx̂ = g·w
            Sum sum_dn, sum_dn_xhat;
            for_row(0, D, [&](auto v, std::size_t j) {
                using V = decltype(v);
                const V xhat = (load<V>(xr + j) - V(m)) * V(rs);
                const V dn = load<V>(gr + j) * load<V>(pw + j);
                sum_dn.add(dn);
                sum_dn_xhat.add(dn * xhat);
            });
            // in the forward pass this was: x̂ = (x - mean(x)) / √(var(x) + eps), or x / √(mean(x²) + eps)
            const real mean_dn = s.center ? sum_dn.total() / real(D) : real(0);
            const real mean_dn_xhat = sum_dn_xhat.total() / real(D);
            real* dxr = dx.data() + r * D;
            for_row(0, D, [&](auto v, std::size_t j) {
                using V = decltype(v);
                const V xhat = (load<V>(xr + j) - V(m)) * V(rs);
                const V dn = load<V>(gr + j) * load<V>(pw + j);
                store(V(rs) * (dn - V(mean_dn) - xhat * V(mean_dn_xhat)), dxr + j);
            });
        }
    });
}

// dL/dw, dL/db (D): columns over the threads, each summed over r in order (thread-count independent),
// kGroup registers of columns at a time, the sums held in registers down the rows (whole cache
// lines of x and g per row); what is left goes a register, then a value, at a time.
void norm_backward_weight_bias(const NormSaved& s, const real* pg, Array& dw, Array& db) {
    const real* px = s.x.data().data();
    const std::size_t N = s.N, D = s.D;
    parallel_for((D + W - 1) / W, grain_columns(N), [&](std::size_t c0, std::size_t c1) {
        // Σ_r over the rows of K column values or registers from j (V = Batch or real), in registers
        auto column_sums = [&](auto v, std::size_t j, auto k_registers) {
            using V = decltype(v);
            constexpr std::size_t K = decltype(k_registers)::value;
            V sw[K], sb[K];
            for (std::size_t k = 0; k < K; ++k) sw[k] = sb[k] = V(real(0));
            for (std::size_t r = 0; r < N; ++r) {
                const V m(s.center ? s.mean[r] : real(0)), rs(s.rstd[r]);
                for (std::size_t k = 0; k < K; ++k) {
                    const std::size_t at = r * D + j + k * W;
                    const V xhat = (load<V>(px + at) - m) * rs;
                    const V g = load<V>(pg + at);
                    sw[k] = xsimd::fma(g, xhat, sw[k]);  // y = x̂·w + b → dL/dw += g·x̂ (one rounding,
                    sb[k] += g;                          //             → dL/db += g    in every path)
                }
            }
            for (std::size_t k = 0; k < K; ++k) {
                if (s.rw) store(sw[k], dw.data() + j + k * W);
                if (s.rb) store(sb[k], db.data() + j + k * W);
            }
        };
        const std::size_t j1 = std::min(c1 * W, D);
        std::size_t j = c0 * W;
        using Group = std::integral_constant<std::size_t, kGroup>;
        using One = std::integral_constant<std::size_t, 1>;
        for (; j + kGroup * W <= j1; j += kGroup * W) column_sums(Batch(), j, Group());
        for_row(j, j1, [&](auto v, std::size_t jj) { column_sums(v, jj, One()); });
    });
}

// The backward: gradients for x, and for weight and bias when given, as they require them.
Grads norm_backward(const NormSaved& s, const Array& grad_out) {
    const std::vector<real> ones(s.has_w ? 0 : s.D, real(1));
    const real* pw = s.has_w ? s.weight.data().data() : ones.data();
    Array dx(s.x.data().shape());
    const ArrayShape ws(s.normalized_shape.begin(), s.normalized_shape.end());
    Array dw(ws), db(ws);  // Σ over rows, each value written once
    if (s.rx) norm_backward_x(s, pw, grad_out.data(), dx);
    if (s.rw || s.rb) norm_backward_weight_bias(s, grad_out.data(), dw, db);
    Grads grads(1 + s.has_w + s.has_b);
    if (s.rx) grads[0] = std::move(dx);
    if (s.rw) grads[1] = std::move(dw);
    if (s.rb) grads[1 + s.has_w] = std::move(db);
    return grads;
}

Tensor fused_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps, bool center, const char* op) {
    const profiler::OpScope scope(op, x, weight, bias);
    const std::size_t D = check_norm_args(x, normalized_shape, weight, bias, eps, op);
    const ArrayShape xs = array_shape(x.data());
    std::size_t N = 1;  // Π of the leading dims (not numel / D, which fails for D = 0)
    for (std::size_t i = 0; i + normalized_shape.size() < xs.size(); ++i) N *= xs[i];
    const bool has_w = weight.defined(), has_b = bias.defined();

    Array y(xs);
    Array mean(ArrayShape{center ? N : 0}), rstd(ArrayShape{N});
    const real* px = x.data().data();
    const std::vector<real> ones(has_w ? 0 : D, real(1)), zeros(has_b ? 0 : D, real(0));
    const real* pw = has_w ? weight.data().data() : ones.data();
    const real* pb = has_b ? bias.data().data() : zeros.data();
    // Rows over the threads, each row whole on one thread.
    parallel_for(N, grain_rows(D), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const auto [m, rs] = norm_row_statistics(px + r * D, D, eps, center);
            if (center) mean[r] = m;
            rstd[r] = rs;
            norm_row_output(px + r * D, m, rs, pw, pb, y.data() + r * D, D);
        }
    });

    std::vector<Tensor> inputs{x};
    if (has_w) inputs.push_back(weight);
    if (has_b) inputs.push_back(bias);
    NormSaved saved{x, weight, normalized_shape, std::move(mean), std::move(rstd), N, D, center, has_w, has_b,
                    x.requires_grad(), has_w && weight.requires_grad(), has_b && bias.requires_grad()};
    return make_result(std::move(y), op, inputs, [s = std::move(saved)](const Array& grad_out, const Array&) {
        return norm_backward(s, grad_out);
    });
}

}  // namespace

namespace functional {

// ---- layer_norm and rms_norm (fused): the kernel above --------------------------------------------
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
    return fused_norm(x, normalized_shape, weight, bias, eps, /*center=*/true, "layer_norm");
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
    return fused_norm(x, normalized_shape, weight, Tensor(), eps.value_or(std::numeric_limits<real>::epsilon()),
                      /*center=*/false, "rms_norm");
}

}  // namespace functional

namespace {

// As Linear: a reassigned member would be read while the optimizer trains the registered one.
// registered: the parameter registered under `name`, or null when none is (then member must be undefined).
void check_still_registered(const Tensor& member, const Tensor* registered, const char* op, const char* name) {
    check(registered ? member.impl() == registered->impl() : !member.defined(), op,
          "the member '{}' is no longer the registered parameter (was it reassigned?); the optimizer and "
          "state_dict() hold the registered one, so it would never be trained; to set values, assign to "
          "{}.mutable_data()", name, name);
}

}  // namespace

// ---- LayerNorm -------------------------------------------------------------------------------------
LayerNorm::LayerNorm(std::int64_t d, double eps, bool elementwise_affine, bool with_bias)
    : d_(d), eps_(eps), affine_(elementwise_affine), has_bias_(elementwise_affine && with_bias) {
    check(d >= 1 && std::uint64_t(d) <= kMaxNumel, "LayerNorm", "d must be in [1, 2^60]; got {}", d);
    check(eps >= 0, "LayerNorm", "eps must be >= 0; got {}", eps);
    if (elementwise_affine) {
        weight = register_parameter("weight", ones({d}));
        if (with_bias) bias = register_parameter("bias", zeros({d}));
    }
}

Tensor LayerNorm::forward(const Tensor& x) const {
    check_still_registered(weight, affine_ ? &registered_parameter("weight") : nullptr, "LayerNorm", "weight");
    check_still_registered(bias, has_bias_ ? &registered_parameter("bias") : nullptr, "LayerNorm", "bias");
    return functional::layer_norm(x, {d_}, weight, bias, eps_);  // fused; oracle: layer_norm_composed
}

// ---- RMSNorm ---------------------------------------------------------------------------------------
RMSNorm::RMSNorm(std::int64_t d, std::optional<double> eps, bool elementwise_affine)
    : d_(d), eps_(eps), affine_(elementwise_affine) {
    check(d >= 1 && std::uint64_t(d) <= kMaxNumel, "RMSNorm", "d must be in [1, 2^60]; got {}", d);
    check(!eps || *eps >= 0, "RMSNorm", "eps must be >= 0; got {}", eps.value_or(0));
    if (elementwise_affine) weight = register_parameter("weight", ones({d}));
}

Tensor RMSNorm::forward(const Tensor& x) const {
    check_still_registered(weight, affine_ ? &registered_parameter("weight") : nullptr, "RMSNorm", "weight");
    return functional::rms_norm(x, {d_}, weight, eps_);  // fused; oracle: rms_norm_composed
}

}  // namespace xgrad::nn
