// core/detail/op_helpers.hpp — small shape helpers shared by the op files (internal; not for users).
//
// DimSplit: a tensor viewed around one dim as (outer, n, inner), for reductions and concat.
#pragma once

#include <cstddef>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// Throws ValueError naming `op` and both shapes unless a and b broadcast (NumPy/PyTorch rules) to a
// shape of at most kMaxNumel elements. Defined in core/elementwise.cpp, beside the ops that use it.
void check_broadcastable(const Tensor& a, const Tensor& b, const char* op);

// Element (o, i, j) sits at flat offset (o·n + i)·inner + j.
struct DimSplit {
    std::size_t outer = 1, n = 1, inner = 1;
};
inline DimSplit split_at(const ArrayShape& shape, std::size_t dim) {
    DimSplit s;
    for (std::size_t i = 0; i < dim; ++i) s.outer *= shape[i];
    s.n = shape[dim];
    for (std::size_t i = dim + 1; i < shape.size(); ++i) s.inner *= shape[i];
    return s;
}

}  // namespace xgrad
