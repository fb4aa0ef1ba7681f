// core/indexing.hpp — row gather and one-hot (core/indexing.cpp). Part of core/ops.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- indexing (core/indexing.cpp) -----------------------------------------------------------------
// Throws IndexError naming `op`, the position (as a multi-index into `ids`) and the value of
// the first ID outside [0, limit). Never clamps or wraps: negative IDs are errors.
void check_ids(const IndexTensor& ids, std::int64_t limit, const char* op);
Tensor index_select(const Tensor& src, int dim, const IndexTensor& index);
// one_hot: (P...) ids → (P..., num_classes) of 0/1. Throws ValueError for num_classes < 0 and
// IndexError for an ID outside [0, num_classes).
Tensor one_hot(const IndexTensor& ids, std::int64_t num_classes);

}  // namespace xgrad
