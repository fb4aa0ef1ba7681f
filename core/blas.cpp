// core/blas.cpp — gemm on OpenBLAS's cblas (see core/blas.hpp).
#include "core/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>

#include "core/parallel.hpp"

namespace xgrad {

namespace {

// One product, or one band of it, on the calling thread (OpenBLAS itself runs with 1 thread;
// see set_num_threads, core/threads.hpp). copy_bt: take the fast path below; decided by gemm for the whole product,
// so that the bands of a split product all go through the same kind of call.
void gemm_one_thread(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
                     const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
                     std::size_t ldc, [[maybe_unused]] bool copy_bt) {
    if (M == 0 || N == 0) return;
    if (K == 0) {  // an empty sum: C = beta·C, so callers may pass an uninitialised C with beta = 0
        for (std::size_t r = 0; r < M; ++r)
            for (std::size_t c = 0; c < N; ++c) C[r * ldc + c] = beta == 0 ? real(0) : beta * C[r * ldc + c];
        return;
    }
    const auto ta = trans_a ? CblasTrans : CblasNoTrans;
    const auto tb = trans_b ? CblasTrans : CblasNoTrans;
    const auto i = [](std::size_t v) { return static_cast<int>(v); };
#ifndef XGRAD_DOUBLE
    // Fast path for A·Bᵀ with a short inner size K, as in Linear's forward x·Wᵀ on a narrow
    // input. OpenBLAS runs small products through kernels that read the operands in place, but
    // declines this one (0.3.21's sgemm_small_kernel_permit refuses a column-major Aᵀ·B, which a
    // row-major A·Bᵀ becomes, when K < 32 or M·N > 1200) and first packs both operands into
    // buffers. Writing Bᵀ out with cblas_somatcopy and multiplying A·(Bᵀ), which the small
    // kernels take, avoids the packing; for larger products the copy would cost more than it
    // saves. Any BLAS gives the same C this way, at the cost of one K × N copy.
    if (copy_bt) {
        Array bt(Shape{K, N});  // Bᵀ (K, N), row-major
        cblas_somatcopy(CblasRowMajor, CblasTrans, i(N), i(K), 1.0f, B, i(ldb), bt.data(), i(N));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i(M), i(N), i(K), alpha, A, i(lda), bt.data(),
                    i(N), beta, C, i(ldc));
        return;
    }
#endif
#ifdef XGRAD_DOUBLE
    cblas_dgemm(CblasRowMajor, ta, tb, i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
#else
    cblas_sgemm(CblasRowMajor, ta, tb, i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
#endif
}

// Products of at least this many multiply-adds are split over the pool's threads: enough work
// that a band outweighs the cost of handing it to a worker (bench/README.md).
constexpr double kSplitMacs = double(1 << 20);
// The fewest rows (or columns) of C one thread gets: a thinner band runs the kernels on
// narrow, inefficient panels.
constexpr std::size_t kSplitGrain = 16;

}  // namespace

// With T = get_pool_threads() > 1 and a product large enough, C is cut into T bands, by rows
// when M ≥ N, else by columns, and each thread computes its band with its own one-thread
// sgemm: band [r0, r1) of C = op(A)[r0:r1, :] · op(B). Each element of C is still one dot
// product over K. The bands depend only on the sizes and T, so a fixed T gives the same C from
// run to run. Against one thread, OpenBLAS may pick a different kernel for a band than for the
// whole product (it chooses by size and by CPU), and so round differently in the last bits.
// Why bands and not OpenBLAS's own threads: the bands scale better on the examples' products
// (bench/thread_handoff), and one pool for every loop means the two never oversubscribe the cores.
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc) {
    check(M < INT_MAX && N < INT_MAX && K < INT_MAX && lda < INT_MAX && ldb < INT_MAX &&
              ldc < INT_MAX,
          "gemm", "sizes ({}, {}, {}) exceed BLAS's 32-bit int range", M, N, K);
    const double macs = double(M) * double(N) * double(K);
#ifndef XGRAD_DOUBLE
    const bool copy_bt = !trans_a && trans_b && K < 32 && macs <= 1e6;  // see gemm_one_thread
#else
    const bool copy_bt = false;
#endif
    if (get_pool_threads() == 1 || macs < kSplitMacs)
        return gemm_one_thread(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, copy_bt);
    if (M >= N) {
        // rows r of op(A): A + r·lda untransposed, column r of the stored A (A + r) transposed
        parallel_for(M, kSplitGrain, [&](std::size_t r0, std::size_t r1) {
            gemm_one_thread(trans_a, trans_b, r1 - r0, N, K, alpha, A + (trans_a ? r0 : r0 * lda), lda, B, ldb,
                            beta, C + r0 * ldc, ldc, copy_bt);
        });
    } else {
        // columns c of op(B): B + c untransposed, row c of the stored B (B + c·ldb) transposed
        parallel_for(N, kSplitGrain, [&](std::size_t c0, std::size_t c1) {
            gemm_one_thread(trans_a, trans_b, M, c1 - c0, K, alpha, A, lda, B + (trans_b ? c0 * ldb : c0), ldb,
                            beta, C + c0, ldc, copy_bt);
        });
    }
}

}  // namespace xgrad
