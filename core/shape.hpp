// core/shape.hpp — reshape, transpose/permute, concat and stack (core/shape.cpp). Part of core/ops.hpp.
#pragma once

#include <cstddef>
#include <vector>
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- helper for writing ops --------------------------------------------------------------------
// Maps dim in [-n, n) to [0, n); throws ValueError naming `op` otherwise.
std::size_t normalize_dim(int dim, std::size_t ndim, const char* op);

// ---- shape (core/shape.cpp) -----------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Dims& shape);
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor concat(const std::vector<Tensor>& xs, int dim);
// stack: n-d tensors of one shape S → (n+1)-d, joined along a new dim at position `dim`, in
//   [-(n+1), n] (negative counts from the end of the result). Throws ValueError for an empty list,
//   a shape differing from the first, or dim out of range. ref: PyTorch docs, torch.stack.
Tensor stack(const std::vector<Tensor>& xs, int dim = 0);

}  // namespace xgrad
