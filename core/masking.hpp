// core/masking.hpp — masks as tensors: masked_fill, tril/triu (core/masking.cpp). Part of core/ops.hpp.
// A mask is usually made by a comparison (eq, ne, lt, ...), so this header brings them along.
#pragma once

#include <cstdint>
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/comparison.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- masking (core/masking.cpp) -------------------------------------------------------------------
// masked_fill: y = value where mask != 0, else x. mask is any Tensor whose shape broadcasts to
//   x's shape (PyTorch's bool True = any nonzero here; NaN counts as nonzero); y has x's shape;
//   value may be ±inf. dL/dx = grad_out with 0 at filled positions; mask gets no gradient.
//   Throws ValueError when mask does not broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, real value);
// tril / triu on the last two dims (rows i, columns j), any leading batch dims: tril keeps
//   j - i <= k, triu keeps j - i >= k, the rest is 0. Differentiable (the gradient is masked
//   the same way). Throws ValueError for fewer than 2 dims.
//   Two mask conventions, as PyTorch's: masked_fill FILLS where mask = 1, so the future (keys after
//   the query) is triu(ones({T, T}), 1); sdpa's attn_mask KEEPS where mask = 1, so the causal one
//   is tril(ones({T, T})) = nn::functional::causal_mask(T, T).
Tensor tril(const Tensor& x, std::int64_t k = 0);
Tensor triu(const Tensor& x, std::int64_t k = 0);

}  // namespace xgrad
