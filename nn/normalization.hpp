// nn/normalization.hpp — layer norm and RMS norm: each one's fused functional form (what the
// module runs), the same computation composed from core ops (its test oracle), and the module.
//
// Legend: x (..., *normalized_shape). A "row" is one slice over the normalized dims:
//   D = Π normalized_shape values per row (D = d for LayerNorm(d) on x (B, T, d)),
//   N = Π of x's leading dims = x.numel() / D rows.
// Each row is normalized on its own, with its mean and its biased variance (divided by D):
//   x̂ = (x - mean) / √(var + eps),    y = x̂ · weight + bias      weight, bias: normalized_shape
// RMS norm drops the centring and the bias: it rescales each row by its root mean square,
//   x̂ = x / √(mean(x²) + eps),        y = x̂ · weight                 weight: normalized_shape
// ref: Ba, Kiros & Hinton 2016, "Layer Normalization"; PyTorch docs, torch.nn.LayerNorm;
// Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; PyTorch docs, torch.nn.RMSNorm
#pragma once

#include <cstdint>
#include <optional>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

namespace functional {

// Layer norm, fused: saves each row's mean and rstd = 1/√(var + eps); closed-form backward
// (nn/normalization.cpp). Two passes, so a constant row has var exactly 0 and gives y = bias.
//   x (..., *normalized_shape), weight and bias of shape normalized_shape or undefined (then
//   1 and 0, without a gradient); y has x's shape. dtype real.
// Throws ValueError for an undefined x, an empty normalized_shape, a normalized_shape that is
// not x's trailing dims, a weight or bias of another shape, or an eps that is negative or NaN.
// ref: PyTorch docs, torch.nn.functional.layer_norm (biased variance, eps inside the √, 1e-5)
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// The same function composed from core ops (autograd's backward): the tests' oracle. Same errors.
Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                           const Tensor& bias = Tensor(), double eps = 1e-5);

// RMS norm, fused: saves each row's rstd = 1/√(mean(x²) + eps); closed-form backward
// (nn/normalization.cpp). A row of zeros gives y = 0 (eps > 0 keeps rstd finite).
//   x (..., *normalized_shape), weight of shape normalized_shape or undefined (then 1, without a
//   gradient); y has x's shape. dtype real. eps = nullopt means std::numeric_limits<real>::epsilon()
//   (1.19e-7 for float), as PyTorch's eps=None.
// Throws ValueError as layer_norm does (undefined x, empty or non-trailing normalized_shape, a
// weight of another shape, eps negative or NaN).
// ref: PyTorch docs, torch.nn.functional.rms_norm (eps inside the √)
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// The same function composed from core ops (autograd's backward): the tests' oracle. Same errors.
Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                         std::optional<double> eps = std::nullopt);

}  // namespace functional

// LayerNorm over the last dim, of width d: y = layer_norm(x, {d}, weight, bias, eps).
//   x (..., d) → y (..., d). Parameters "weight" (d) = 1 and "bias" (d) = 0, as PyTorch;
//   elementwise_affine = false registers neither, bias = false no bias (handles then undefined).
// Throws ValueError for d outside [1, 2^60] or an eps that is negative or NaN.
class LayerNorm : public Module {
public:
    explicit LayerNorm(std::int64_t d, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
    Tensor forward(const Tensor& x) const;

    Tensor weight;  // (d) or undefined
    Tensor bias;    // (d) or undefined

private:
    std::int64_t d_;
    double eps_;
    bool affine_;    // weight registered (elementwise_affine)
    bool has_bias_;  // bias registered too
};

// RMSNorm over the last dim, of width d: y = rms_norm(x, {d}, weight, eps).
//   x (..., d) → y (..., d). Parameter "weight" (d) = 1, as PyTorch; elementwise_affine = false
//   registers none (weight then undefined). eps = nullopt: the dtype's machine epsilon, as
//   PyTorch; LLaMA uses 1e-5 (Meta's norm_eps), which examples/gpt/llama.cpp passes.
// Throws ValueError for d outside [1, 2^60] or an eps that is negative or NaN.
class RMSNorm : public Module {
public:
    explicit RMSNorm(std::int64_t d, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) const;

    Tensor weight;  // (d) or undefined

private:
    std::int64_t d_;
    std::optional<double> eps_;
    bool affine_;  // weight registered (elementwise_affine)
};

}  // namespace xgrad::nn
