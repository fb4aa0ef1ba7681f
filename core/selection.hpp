// core/selection.hpp — choosing elements: where, gather, scatter_add, topk, sort, argsort
// (core/selection.cpp). Part of core/ops.hpp. Names and semantics are PyTorch's; dims may be
// negative and count from the end; IDs are never clamped or wrapped.
#pragma once

#include <cstdint>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// What topk and sort return, as PyTorch's torch.return_types.topk / .sort: the chosen values
// (differentiable) and where along dim each came from.   auto [values, indices] = topk(x, 3);
struct ValuesIndices {
    Tensor values;
    IndexTensor indices;
};

// where: out = x where cond is 1, y where cond is 0. cond is a 0/1 mask (eq, lt, ... of
//   core/comparison.hpp); cond, x and y broadcast to out's shape (PyTorch rules). dL/dx = g·cond,
//   dL/dy = g·(1 − cond), each summed back to its operand's shape; cond gets no gradient.
//   Throws ValueError when the shapes do not broadcast or cond holds a value other than 0 or 1.
//   ref: PyTorch docs, torch.where.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);

// gather: out[c] = input[c with coordinate dim replaced by index[c]], for every position c of
//   index; out has index's shape. index has input's number of dims, index.size(d) <= input.size(d)
//   for d != dim. Backward: g scatter-added into input's shape (repeated indices sum).
//   Throws ValueError for dim outside [-n, n) or shapes breaking the rule, IndexError for an index
//   outside [0, input.size(dim)).   ref: PyTorch docs, torch.gather.
Tensor gather(const Tensor& input, int dim, const IndexTensor& index);

// scatter_add (out-of-place): out = input, then out[c with coordinate dim replaced by index[c]]
//   += src[c] for every position c of index. index, src and input have one number of dims;
//   index.size(d) <= src.size(d) for all d, <= input.size(d) for d != dim. dL/dinput = g,
//   dL/dsrc = gather(g, dim, index) at index's positions, 0 where src is larger than index.
//   Errors as gather.   ref: PyTorch docs, torch.scatter_add / Tensor.scatter_add_.
Tensor scatter_add(const Tensor& input, int dim, const IndexTensor& index, const Tensor& src);

// topk: the k largest (largest = true) or smallest values along dim and their positions; values
//   and indices have x's shape with k at dim. NaN counts as larger than every number; equal values
//   come lower index first (PyTorch leaves their order unspecified); the result is always sorted,
//   whatever `sorted` says (PyTorch: unspecified order when false). Backward: g put back at the
//   chosen positions (a gather's backward), 0 elsewhere. A 0-d x is one element (k must be 1).
//   Throws ValueError for dim out of range or k outside [0, x.size(dim)].  ref: PyTorch docs, torch.topk.
ValuesIndices topk(const Tensor& x, std::int64_t k, int dim = -1, bool largest = true, bool sorted = true);

// sort: the values along dim in ascending (or descending) order, and where each came from; both
//   x's shape. Stable: equal values keep their order (torch.sort(stable=True)); NaN sorts above every
//   number (last ascending, first descending), as PyTorch. Backward as topk's.
//   Throws ValueError for dim out of range.  ref: PyTorch docs, torch.sort.
ValuesIndices sort(const Tensor& x, int dim = -1, bool descending = false);
// argsort: sort(x, dim, descending).indices, without computing the values.  ref: torch.argsort.
IndexTensor argsort(const Tensor& x, int dim = -1, bool descending = false);

}  // namespace xgrad
