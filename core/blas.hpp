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

// Stored shapes: A is (M, K), or (K, M) when trans_a; B is (K, N), or (N, K) when trans_b; C is
// (M, N); each lda/ldb/ldc is at least its matrix's stored row length. C must not overlap A or
// B. K = 0 gives C = beta·C (with beta = 0, C may start uninitialised). Large products (at least
// 2^20 multiply-adds) are split over the threads of core/parallel.hpp (core/blas.cpp says how);
// gemm may be called inside a parallel_for body, and then runs on that thread alone.
// Throws ValueError when a size or leading dimension does not fit BLAS's 32-bit int.
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc);

// The examples' --threads flag: n threads for xgrad's parallel loops (set_pool_threads,
// core/parallel.hpp), large products included (gemm splits C into bands, one per thread), and
// OpenBLAS itself on 1 thread, so the two never compete for the cores. Process-wide: OpenBLAS
// stays on 1 thread for every other caller too. Never called, xgrad runs on 1 thread and
// OpenBLAS on its default (OPENBLAS_NUM_THREADS, else one per core); the examples always call
// it (--threads 1 by default), so there OPENBLAS_NUM_THREADS has no effect. Use n no larger
// than the idle cores: the pool's workers spin for up to ~0.5 ms after each task, so on a busy
// machine, or with n above the core count, a step gets slower, not faster (2 threads ran a
// GPT step 2.5-4x slower than 1 on a 2-core machine busy with a CI build). Changing n while
// another thread trains changes that run's split, and with it possibly its last bits.
// Not to be called from inside a parallel_for body. Throws ValueError for n < 1.
void set_num_threads(int n);

}  // namespace xgrad
