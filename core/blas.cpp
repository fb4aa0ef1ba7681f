// core/blas.cpp — gemm on OpenBLAS's cblas (see core/blas.hpp).
#include <xgrad/core/blas.hpp>

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include <xgrad/core/parallel.hpp>

namespace xgrad {

namespace {

// One product, or one band of it, on this thread; copy_bt (below) is decided for the whole product.
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
    if (M == 1) {
        // One row (a generated token): C (1, N) = alpha · a (K) · op(B) is a matrix-vector product.
        // gemm would first pack all of B into panels, a copy as large as B for one use of it;
        // gemv streams B once. a is row 0 of op(A): contiguous, or down a column of the stored A.
        // y = op(B)ᵀ·a: with B stored (K, N), Bᵀ·a; with B stored (N, K) (trans_b), B·a.
        const auto t_gemv = trans_b ? CblasNoTrans : CblasTrans;
        const int rows = trans_b ? i(N) : i(K), cols = trans_b ? i(K) : i(N), inc_a = trans_a ? i(lda) : 1;
#ifdef XGRAD_DOUBLE
        cblas_dgemv(CblasRowMajor, t_gemv, rows, cols, alpha, B, i(ldb), A, inc_a, beta, C, 1);
#else
        cblas_sgemv(CblasRowMajor, t_gemv, rows, cols, alpha, B, i(ldb), A, inc_a, beta, C, 1);
#endif
        return;
    }
#ifndef XGRAD_DOUBLE
    // A·Bᵀ with a short K (Linear's x·Wᵀ on a narrow input): OpenBLAS 0.3.21's small kernels
    // refuse it (sgemm_small_kernel_permit) and pack both operands; writing Bᵀ out
    // (cblas_somatcopy) and multiplying A·(Bᵀ) takes the small kernels. Same C, one K × N copy.
    if (copy_bt) {
        Array bt(ArrayShape{K, N});  // Bᵀ (K, N), row-major
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

// Products of at least this many multiply-adds are split over the pool's threads.
constexpr double kSplitMacs = double(1 << 20);
// The fewest rows (or columns) of C one thread gets: thinner bands make inefficient panels.
constexpr std::size_t kSplitGrain = 16;

}  // namespace

// With T = get_pool_threads() > 1 and a large product, C is cut into T bands (by rows when
// M ≥ N, else columns), each a one-thread sgemm: C[r0:r1, :] = op(A)[r0:r1, :] · op(B). A fixed
// T gives the same C run to run; against one thread OpenBLAS may pick another kernel for a band
// and round differently in the last bits. One pool for every loop never oversubscribes the cores.
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc) {
    check(M < INT_MAX && N < INT_MAX && K < INT_MAX && lda < INT_MAX && ldb < INT_MAX &&
              ldc < INT_MAX,
          "gemm", "sizes ({}, {}, {}) exceed BLAS's 32-bit int range", M, N, K);
    // One OpenBLAS thread per xgrad thread, from the first product on, even without a
    // set_num_threads call: the pool below splits the bands, so OpenBLAS's own threads would
    // only compete with it for the same cores.
    static std::once_flag blas_threads;
    std::call_once(blas_threads, [] { openblas_set_num_threads(1); });
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
