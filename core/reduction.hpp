// core/reduction.hpp — reductions over all elements or one dim, and the running sum cumsum
// (core/reduction.cpp). Part of core/ops.hpp.
#pragma once

#include <cstddef>
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- helper for writing ops --------------------------------------------------------------------
// Σ of n contiguous values, accumulated in double in four registers of partial sums (so the
// additions pipeline instead of each waiting for the one before). Used by sum(), layer_norm's
// row means and cross_entropy's row sums.
double sum_double(const real* p, std::size_t n);

// ---- reductions (core/reduction.cpp; sum_double too) ----------------------------------------------
Tensor sum(const Tensor& x);                               // () 
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
Tensor max(const Tensor& x);                               // () 
Tensor max(const Tensor& x, int dim, bool keepdim = false);
IndexTensor argmax(const Tensor& x, int dim, bool keepdim = false);
// cumsum: y[..., i, ...] = Σ_{k <= i} x[..., k, ...] along dim, x's shape (a 0-d x is one element);
//   summed in double, as PyTorch's CPU kernel. Throws ValueError for dim outside [-n, n).
//   ref: PyTorch docs, torch.cumsum.
Tensor cumsum(const Tensor& x, int dim);

}  // namespace xgrad
