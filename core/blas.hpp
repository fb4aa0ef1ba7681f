// core/blas.hpp — the one matrix-multiply kernel xgrad uses: BLAS gemm.
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C,   op(X) = X or Xᵀ
//
// All matrices are row-major and contiguous; lda/ldb/ldc are their row lengths. With
// beta = 1 the product is added into C, which is how gradients accumulate (dW += Xᵀ·dY).
// Runs on cblas_sgemm (float) or cblas_dgemm (double) from OpenBLAS. <cblas.h> is included
// only in core/blas.cpp: it clashes with xtensor-blas's own declarations.
#pragma once

#include "core/tensor.hpp"

namespace xgrad {

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc);

// The examples' --threads flag: n threads for xgrad's parallel loops (set_pool_threads,
// core/parallel.hpp), large products included (gemm splits C into bands, one per thread), and
// OpenBLAS itself on 1 thread, so the two never compete for the cores. Throws ValueError for n < 1.
void set_num_threads(int n);

}  // namespace xgrad
