// core/blas.cpp — gemm on OpenBLAS's cblas and, for small float products, libxsmm (see
// core/blas.hpp).
//
// Which library runs a one-thread product (gemm_one_thread, the rule in use_libxsmm):
//   M = 1                                   OpenBLAS's gemv (one row: streams B once)
//   libxsmm built in, float, beta 0 or 1 (beta 1 with alpha ≠ 1: only A·Bᵀ or Aᵀ·Bᵀ),
//   and M·N·K ≤ 10⁸, except Aᵀ·B with N ≥ 512
//                                           libxsmm's JIT kernel for the shape
//   anything else                           OpenBLAS's gemm
// libxsmm (Debian libxsmm-dev) generates a kernel per shape with nothing packed, which wins where
// packing costs as much as the multiply-adds; OpenBLAS's packed panels win on large products.
// Without libxsmm (XGRAD_HAVE_LIBXSMM undefined) every product is OpenBLAS's.
#include <xgrad/core/blas.hpp>

#include <cblas.h>
#ifdef XGRAD_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>

#include <xgrad/core/profiler_hooks.hpp>
#include <xgrad/core/parallel.hpp>

namespace xgrad {

namespace {

// The libraries' one-time setup (OpenBLAS's thread count, libxsmm_init) and libxsmm's registry
// of generated kernels are guarded by flags and locks of their own that fork() does not reset: a
// child forked while another thread is inside them would wait forever in its first product.
// Every call that may take them holds this lock, and so does fork() (pthread_atfork; registered
// at load, so taken after the pool's and the backward's handlers, which wait for work that may
// multiply). A dispatched kernel takes no lock and runs outside it.
std::mutex& blas_setup_lock() {
    static std::mutex m;
    return m;
}
const int g_blas_setup_atfork = pthread_atfork([] { blas_setup_lock().lock(); },
                                               [] { blas_setup_lock().unlock(); },
                                               [] { blas_setup_lock().unlock(); });

#if defined(XGRAD_HAVE_LIBXSMM) && !defined(XGRAD_DOUBLE)
// libxsmm below M·N·K = 10⁸, OpenBLAS above, and OpenBLAS for Aᵀ·B with N ≥ 512 (a weight
// gradient dW = dYᵀ·X of a wide layer): the rule stands on the per-shape rows W7 of
// bench/README.md (OpenBLAS, libxsmm and BLIS on every product of T1, T5 and the BPE head). Where
// the two libraries measure within a few percent of each other (mlp.c_fc's dW, 512 × 128 × 768
// Aᵀ·B), the rule's side is as good as the other; the rule is not bent shape by shape.
// libxsmm's kernels compute alpha = 1 with beta 0 or 1 only; gemm_libxsmm applies another alpha
// to its own copy of Bᵀ, or with beta = 0 to C after the kernel, and leaves the rest (beta = 1
// with alpha ≠ 1 on a plain B, beta neither 0 nor 1) to OpenBLAS.
bool use_libxsmm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
                 real beta) {
    if (beta != 0 && beta != 1) return false;
    if (alpha != 1 && !trans_b && beta != 0) return false;
    if (trans_a && !trans_b && N >= 512) return false;
    return double(M) * double(N) * double(K) <= 1e8;
}

// C = alpha·op(A)·op(B) + beta·C on libxsmm; false when libxsmm has no kernel for the shape.
// libxsmm is column-major: our row-major C (M, N) is its column-major Cᵀ (N, M), and
//   Cᵀ = op(B)ᵀ · op(A)ᵀ,
// so B is libxsmm's first operand and A its second. A row-major B (K, N) is the column-major
// (N, K) = op(B)ᵀ as it stands; a row-major A (M, K) is column-major (K, M) = Aᵀ, so our trans_a
// is libxsmm's TRANS_B flag. libxsmm 1.17's JIT has no kernel with a transposed first operand,
// our trans_b: there B (N, K) is first written out as a scratch alpha·Bᵀ (K, N) of this call, by
// OpenBLAS's transposing copy (libxsmm's own would take libxsmm's locks).
bool gemm_libxsmm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
                  const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
                  std::size_t ldc) {
    const auto i = [](std::size_t v) { return static_cast<libxsmm_blasint>(v); };
    std::unique_ptr<real[]> bt;  // alpha·Bᵀ (K, N), row-major, when trans_b: this call's own
    const real* first = B;
    libxsmm_blasint ld_first = i(ldb);
    if (trans_b) {
        bt.reset(new real[K * N]);
        cblas_somatcopy(CblasRowMajor, CblasTrans, int(N), int(K), alpha, B, int(ldb), bt.get(), int(N));
        first = bt.get();  // alpha is in it: the kernel multiplies with alpha = 1
        ld_first = i(N);
    }
    std::unique_lock<std::mutex> lock(blas_setup_lock());  // released before the kernel runs
    static bool initialised = false;  // under the lock; libxsmm's dispatch is thread-safe after it
    if (!initialised) libxsmm_init();
    initialised = true;
    const libxsmm_blasint la = ld_first, lb = i(lda), lc = i(ldc);
    const real one = 1;
    const int flags = (trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE) |
                      (beta == 0 ? LIBXSMM_GEMM_FLAG_BETA_0 : 0);
    const libxsmm_smmfunction kernel =
        libxsmm_smmdispatch(i(N), i(M), i(K), &la, &lb, &lc, &one, &beta, &flags, nullptr);
    lock.unlock();
    if (!kernel) return false;
    kernel(first, A, C);
    if (alpha != 1 && !trans_b)  // beta = 0 here (use_libxsmm): C = op(A)·op(B), then alpha·C
        for (std::size_t r = 0; r < M; ++r)
            for (std::size_t c = 0; c < N; ++c) C[r * ldc + c] *= alpha;
    return true;
}
#endif

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
#if defined(XGRAD_HAVE_LIBXSMM) && !defined(XGRAD_DOUBLE)
    if (use_libxsmm(trans_a, trans_b, M, N, K, alpha, beta) &&
        gemm_libxsmm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
#endif
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
// T gives the same C run to run; against one thread a band may run on another library or kernel
// (the rule above is applied per band) and round differently in the last bits. One pool for
// every loop never oversubscribes the cores.
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
          const real* A, std::size_t lda, const real* B, std::size_t ldb, real beta, real* C,
          std::size_t ldc) {
    check(M < INT_MAX && N < INT_MAX && K < INT_MAX && lda < INT_MAX && ldb < INT_MAX &&
              ldc < INT_MAX,
          "gemm", "sizes ({}, {}, {}) exceed BLAS's 32-bit int range", M, N, K);
    // One OpenBLAS thread per xgrad thread, from the first product on, even without a
    // set_num_threads call: the pool below splits the bands, so OpenBLAS's own threads would
    // only compete with it for the same cores.
    profiler::detail::count_flops(2.0 * double(M) * double(N) * double(K));  // to the op it runs in
    static std::atomic<bool> blas_threads_set{false};
    if (!blas_threads_set.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(blas_setup_lock());
        if (!blas_threads_set.load(std::memory_order_relaxed)) openblas_set_num_threads(1);
        blas_threads_set.store(true, std::memory_order_release);
    }
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
