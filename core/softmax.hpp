// core/softmax.hpp — the row kernels of the fused softmax (core/softmax.cpp), for fused ops
// built on it (nn/attention_fused.cpp). The op itself, softmax(x, dim), is in core/ops.hpp.
//
// Legend: a row is n values, `stride` apart in memory (1: adjacent, the vectorised case).
#pragma once

#include <cstddef>

#include "core/tensor.hpp"

namespace xgrad {

// y = softmax(x) over one row: c = max_i x_i, y_i = e^(x_i - c) / Σ_j e^(x_j - c). y may be x.
void softmax_row(const real* x, real* y, std::size_t n, std::size_t stride = 1);

// dx = y ⊙ (g − Σ_k g_k y_k) over one row (softmax's backward from its output y). dx may be g.
void softmax_backward_row(const real* y, const real* g, real* dx, std::size_t n, std::size_t stride = 1);

}  // namespace xgrad
