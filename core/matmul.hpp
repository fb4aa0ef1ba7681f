// core/matmul.hpp — the matrix product (core/matmul.cpp, on core/blas.cpp's gemm). Part of core/ops.hpp.
#pragma once

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- linear algebra (core/matmul.cpp) -------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace xgrad
