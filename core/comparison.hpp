// core/comparison.hpp — comparisons (core/comparison.cpp): eq ne lt le gt ge, allclose, equal.
// Part of core/ops.hpp.
#pragma once

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- element-wise comparisons --------------------------------------------------------------------
// y = 1 where a OP b, else 0, for OP in == != < <= > >=. a and b broadcast (PyTorch rules) to y's
//   shape; with a number v, y has a's shape. y is a `real` Tensor of 0/1 (torch returns bool), a
//   constant: requires_grad false, no graph. IEEE: a comparison with NaN is false, except ne (true);
//   -0 == 0. Throws ValueError for an undefined tensor or shapes that do not broadcast.
//   ref: PyTorch docs, torch.eq / ne / lt / le / gt / ge.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// The same for two IndexTensors (IDs, targets): eq(argmax(logits, -1), y).mean() is the accuracy.
Tensor eq(const IndexTensor& a, const IndexTensor& b);
Tensor ne(const IndexTensor& a, const IndexTensor& b);
Tensor eq(const Tensor& a, real v);
Tensor ne(const Tensor& a, real v);
Tensor lt(const Tensor& a, real v);
Tensor le(const Tensor& a, real v);
Tensor gt(const Tensor& a, real v);
Tensor ge(const Tensor& a, real v);

// ---- whole-tensor tests ----------------------------------------------------------------------------
// allclose: true when |a - b| <= atol + rtol·|b| at every element of the broadcast shape (b is the
//   reference: not symmetric), computed in `real`. NaN is close to nothing, unless equal_nan (then
//   to NaN); ±inf is close only to the same inf. True for an empty shape. Throws ValueError for an
//   undefined tensor, shapes that do not broadcast, or rtol < 0 or atol < 0.
//   ref: PyTorch docs, torch.allclose / torch.isclose.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// equal: same shape and the same values (NaN differs from everything, -0 == 0). Throws ValueError
//   for an undefined tensor. ref: PyTorch docs, torch.equal.
bool equal(const Tensor& a, const Tensor& b);
bool equal(const IndexTensor& a, const IndexTensor& b);

}  // namespace xgrad
