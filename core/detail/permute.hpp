// core/detail/permute.hpp — the data movement behind permute and transpose (core/shape.cpp).
// Legend: x of n dims; perm a permutation of 0..n-1; y.shape[i] = x.shape[perm[i]].
#pragma once

#include <cstddef>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// y = x with its dims reordered: y[i_0, ..., i_{n-1}] = x at index i_k along dim perm[k].
// A fresh contiguous array; perm is assumed valid (permute checks it).
Array permute_array(const Array& x, const std::vector<std::size_t>& perm);

}  // namespace xgrad
