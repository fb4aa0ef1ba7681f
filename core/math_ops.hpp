// core/math_ops.hpp — sqrt, rsqrt and var (core/math_ops.cpp). Part of core/ops.hpp.
#pragma once

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

}  // namespace xgrad
