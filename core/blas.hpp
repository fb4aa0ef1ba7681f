// core/blas.hpp — the one matrix-multiply kernel xgrad uses: BLAS gemm.
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C,   op(X) = X or Xᵀ
//
// Row-major; lda/ldb/ldc are row lengths. beta = 1 adds into C (dW += Xᵀ·dY). On OpenBLAS's
// cblas_sgemm / cblas_dgemm, and its gemv when M = 1 (one row, as in generation, where gemm's
// packing of B would cost more than the product); small float products on libxsmm's JIT kernels
// when xgrad is built with libxsmm (the rule is in core/blas.cpp). <cblas.h> and <libxsmm.h> stay
// in the .cpp (cblas.h clashes with xtensor-blas).
#pragma once

#include <xgrad/core/tensor.hpp>
#include <xgrad/core/threads.hpp>  // set_num_threads: the examples include this header for it

namespace xgrad {

// A (M, K), or (K, M) when trans_a; B (K, N), or (N, K) when trans_b; C (M, N), not overlapping
// A or B. K = 0 gives C = beta·C (beta = 0: C may start uninitialised). Large products are split
// over the pool (core/blas.cpp). Throws ValueError when a size does not fit BLAS's 32-bit int.
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc);

}  // namespace xgrad
