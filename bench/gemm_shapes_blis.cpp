// bench/gemm_shapes_blis.cpp — BLIS's side of bench/gemm_shapes.cpp, in a translation unit of its
// own.
//
// <blis.h> declares BLIS's CBLAS layer with the same enum names as OpenBLAS's <cblas.h>
// (CBLAS_ORDER, CBLAS_TRANSPOSE), so the two headers cannot meet in one file. This file includes
// only <blis.h> and offers gemm_shapes.cpp two plain functions on BLIS's own typed API, bli_sgemm.
//
// libblis also exports cblas_sgemm and sgemm_, the names OpenBLAS provides to xgrad::gemm and to
// the openblas rows. Linked into the program, whichever of the two libraries the dynamic linker
// meets first would provide them for everybody. So libblis is not linked: it is opened here with
// dlopen(RTLD_LOCAL), which keeps its names out of the program's, and only its two functions used
// below are looked up (GEMM_SHAPES_BLIS, the library's path, comes from bench/CMakeLists.txt).
//
// bli_sgemm takes a row stride and a column stride for each matrix, so a row-major matrix with
// leading dimension ld is (rs, cs) = (ld, 1) and no transposition trick is needed:
//
//   C (M, N) = op(A) · op(B),   op(X) = X or Xᵀ,   A stored (M, K) or (K, M), B (K, N) or (N, K)
#include <blis.h>
#include <dlfcn.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace gemm_shapes {

namespace {

// BLIS's functions, opened once; a missing library or name throws std::runtime_error.
struct Blis {
    decltype(&bli_sgemm) sgemm;
    decltype(&bli_thread_set_num_threads) set_num_threads;
    Blis() {
        void* lib = dlopen(GEMM_SHAPES_BLIS, RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw std::runtime_error(std::string("gemm_shapes: cannot open BLIS: ") + dlerror());
        sgemm = reinterpret_cast<decltype(sgemm)>(symbol(lib, "bli_sgemm"));
        set_num_threads = reinterpret_cast<decltype(set_num_threads)>(symbol(lib, "bli_thread_set_num_threads"));
    }
    static void* symbol(void* lib, const char* name) {
        void* f = dlsym(lib, name);
        if (!f) throw std::runtime_error(std::string("gemm_shapes: BLIS has no ") + name);
        return f;
    }
};

const Blis& blis() {
    static const Blis b;
    return b;
}

}  // namespace

// Debian's libblis is the OpenMP build: one thread, as OpenBLAS and libxsmm get.
void blis_one_thread() { blis().set_num_threads(1); }

// C = op(A) · op(B), beta = 0, row-major with leading dimensions lda, ldb, ldc (see the header).
void blis_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, const float* A,
               std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc) {
    float alpha = 1, beta = 0;
    blis().sgemm(trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 dim_t(M), dim_t(N), dim_t(K), &alpha, const_cast<float*>(A), inc_t(lda), 1,
                 const_cast<float*>(B), inc_t(ldb), 1, &beta, C, inc_t(ldc), 1);
}

}  // namespace gemm_shapes
