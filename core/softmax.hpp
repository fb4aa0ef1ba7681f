// core/softmax.hpp — softmax along a dim (core/softmax.cpp): the fused op, its composed oracle,
// log_softmax, and the row kernels that other fused ops build on (nn/attention/fused.cpp).
// Part of core/ops.hpp.
//
// Legend: a row is n values, `stride` apart in memory (1: adjacent, the vectorised case).
#pragma once

#include <cstddef>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// softmax along dim (x any shape, y the same shape), fused: one pass per row forward, and a
// backward from the saved y. softmax_composed is the same function built from max, sub, exp, sum
// and div: the lesson, and the oracle a test holds softmax equal to. log_softmax is composed.
Tensor softmax(const Tensor& x, int dim);
Tensor softmax_composed(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);

// y = softmax(x) over one row: c = max_i x_i, y_i = e^(x_i - c) / Σ_j e^(x_j - c). y may be x.
void softmax_row(const real* x, real* y, std::size_t n, std::size_t stride = 1);

// dx = y ⊙ (g − Σ_k g_k y_k) over one row (softmax's backward from its output y). dx may be g.
void softmax_backward_row(const real* y, const real* g, real* dx, std::size_t n, std::size_t stride = 1);

}  // namespace xgrad
