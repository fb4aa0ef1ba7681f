// core/slicing.hpp — narrow, split and chunk (core/slicing.cpp). Part of core/ops.hpp.
#pragma once

#include <cstdint>
#include <vector>
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- slicing (core/slicing.cpp) -------------------------------------------------------------------
// Pieces of x along one dim, each a fresh array; the gradient of a piece lands back in its slice
// of dL/dx (zeros elsewhere). dim may be negative. ref: PyTorch docs, torch.narrow/split/chunk.
// narrow: x[..., start : start + length, ...] along dim. start may be negative and then counts
//   from the end (start + size), as in PyTorch. Throws ValueError for a 0-d x, a negative length,
//   or start + length past the end; IndexError for start outside [-size, size].
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);
// split: pieces of split_size along dim; the last one is smaller when split_size does not
//   divide the size. Throws ValueError for split_size < 0, or 0 on a non-empty dim.
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, int dim = 0);
// chunk: split(x, ceil(size / chunks), dim), so it may return FEWER than `chunks` pieces
//   (size 6 in 4 chunks gives 2, 2, 2), exactly like torch.chunk. Throws ValueError for chunks < 1.
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim = 0);

}  // namespace xgrad
