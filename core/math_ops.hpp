// core/math_ops.hpp — sqrt, rsqrt, var; abs, clamp, minimum, maximum (core/math_ops.cpp).
// Part of core/ops.hpp.
#pragma once

#include <optional>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- more math (core/math_ops.cpp) -----------------------------------------------------------------
Tensor sqrt(const Tensor& x);   // √x;  x < 0 gives NaN, and dL/dx = inf at x = 0 (as PyTorch)
Tensor rsqrt(const Tensor& x);  // 1/√x; x = 0 gives inf
// var along dim: Σ(x - mean)² / (N - 1) when unbiased (Bessel), / N otherwise, summed in double.
//   As in PyTorch 1.13, a divisor of 0 (N = 1 unbiased, or N = 0) gives NaN, and so does its
//   gradient. Shape: x's shape without dim (with a 1 there if keepdim).
Tensor var(const Tensor& x, int dim, bool keepdim = false, bool unbiased = true);

// ---- piecewise (core/math_ops.cpp) -----------------------------------------------------------------
// abs: |x|, any shape; dL/dx = sign(x)·g with sign(0) = 0 (as PyTorch).
Tensor abs(const Tensor& x);
// clamp: min(max(x, min), max), any shape, either bound optional (clamp_min, clamp_max: one bound).
//   NaN stays NaN. min > max gives max everywhere (as torch.clamp). dL/dx = g where min <= x <= max,
//   else 0 (so 0 everywhere when min > max). Throws ValueError when neither bound is given or a
//   bound is NaN (torch.clamp then returns NaN everywhere; a NaN bound is a bug upstream).
//   ref: PyTorch docs, torch.clamp; clamp_backward in PyTorch's FunctionsManual.cpp.
Tensor clamp(const Tensor& x, std::optional<real> min, std::optional<real> max);
Tensor clamp_min(const Tensor& x, real min);
Tensor clamp_max(const Tensor& x, real max);
// minimum / maximum: elementwise min / max of a and b, broadcast (PyTorch rules; ValueError when the
//   shapes do not broadcast); NaN in either gives NaN. The gradient goes to the smaller (larger)
//   operand, g/2 to each at a tie, and g to both where one is NaN, as PyTorch's derivatives.yaml.
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);

}  // namespace xgrad
