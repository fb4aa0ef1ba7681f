// bench/gemm_shapes.cpp — workload W7: every matrix-product shape of the GPT step (T1), of causal
// attention alone (T5) and of the BPE model's head, timed on four libraries side by side.
//
// What is measured. One call C (M, N) = op(A) · op(B) with beta = 0, row-major, float32, one
// thread, on warm operands (the same A, B and C every iteration, as a training step reuses its
// weights and activations from cache), by:
//
//   openblas   OpenBLAS's cblas_sgemm (openblas_set_num_threads(1))
//   libxsmm    libxsmm 1.17's JIT kernel for the shape (libxsmm_smmdispatch, dispatched once,
//              before timing); libxsmm is column-major, so C = op(A)·op(B) is computed as
//              Cᵀ = op(B)ᵀ·op(A)ᵀ. Its JIT has no kernel with a transposed first operand, which
//              is our trans_b (A·Bᵀ: a Linear's forward, attention's q·kᵀ): there B is first
//              transposed (libxsmm_otrans, inside the timed call) and the plain kernel runs
//   blis       BLIS's typed API bli_sgemm (bench/gemm_shapes_blis.cpp), 1 thread
//   xgrad      xgrad::gemm (core/blas.hpp): whatever the library dispatches to today
//
// The counter GFLOPs is 2·M·N·K per call, per second. Before any timing every library's C is
// checked against a double-precision triple loop on the same inputs: max |C − C_ref| must stay
// within 1e-4 of max |C_ref|, else the program exits 1 naming the shape and the library.
//
// Why: the step's products are small (768 rows of width 128, and 64 × 64 × 32 per attention
// head), where a library's fixed costs (packing both operands, zeroing C) weigh as much as the
// multiply-adds, and libraries differ most. The table this prints is the measured ground on which
// core/blas.cpp's choice of library per shape stands. bench/w7.py turns it into bench/README.md's
// W7 rows (bench/compare.py --only W7).
//
// Shapes (kShapes below): T1 is examples/gpt's step (L 4, H 4, d 128, T 64, B 12, V 73, AdamW):
// B·T = 768 rows through each Linear, and the fused attention kernel's per-head products over
// B·H = 48 heads; T5 runs attention alone on (1, 4, T, 32), T = 64, 256, 1,024, through the fused
// and the tiled kernel (nn/attention/); the BPE model's head is a Linear 128 → 4,096 on 768 rows.
// A Linear (nn/linear.cpp) computes y = x·Wᵀ (NT), dx = dy·W (NN), dW = dyᵀ·x (TN); matmul's
// backward (core/matmul.cpp) dA = dC·Bᵀ, dB = Aᵀ·dC. A shape's "uses" says where it comes from and
// how many calls one step (T1) or one forward + backward (T5) makes.
//
// Run: gemm_shapes [Google Benchmark flags]. Names: W7/<library>/<M>x<N>x<K>_<op(A)><op(B)>, with
// N for a plain operand and T for a transposed one.
// Legend: M, N rows and columns of C, K the summed length; NT = A·Bᵀ, NN = A·B, TN = Aᵀ·B.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>
#include <libxsmm.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/threads.hpp>

namespace gemm_shapes {  // bench/gemm_shapes_blis.cpp
void blis_one_thread();
void blis_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, const float* A,
               std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc);
}  // namespace gemm_shapes

namespace {

struct Shape {
    std::size_t M, N, K;
    bool ta, tb;       // A stored (K, M) when ta; B stored (N, K) when tb
    const char* uses;  // where the shape is called, with its calls per step
};

// Every distinct (M, N, K, op(A), op(B)) the three workloads call, with its calls per T1 step or per
// T5 forward + backward (x n), as found by counting cblas_sgemm calls in xgrad_bench's T1 and T5
// runs; T1 has 4 layers, T5 4 heads.
const Shape kShapes[] = {
    // T1: the Linears on 768 rows; d 128, 3d 384, 4d 512, V 73
    {768, 384, 128, false, true, "T1 attn.c_attn fwd x4"},
    {768, 128, 384, false, false, "T1 attn.c_attn dx x4"},
    {384, 128, 768, true, false, "T1 attn.c_attn dW x4"},
    {768, 128, 128, false, true, "T1 attn.c_proj fwd x4"},
    {768, 128, 128, false, false, "T1 attn.c_proj dx x4"},
    {128, 128, 768, true, false, "T1 attn.c_proj dW x4"},
    {768, 512, 128, false, true, "T1 mlp.c_fc fwd x4"},
    {768, 128, 512, false, false, "T1 mlp.c_fc dx x4"},
    {512, 128, 768, true, false, "T1 mlp.c_fc dW x4"},
    {768, 128, 512, false, true, "T1 mlp.c_proj fwd x4"},
    {768, 512, 128, false, false, "T1 mlp.c_proj dx x4"},
    {128, 512, 768, true, false, "T1 mlp.c_proj dW x4"},
    {768, 73, 128, false, true, "T1 lm_head fwd x1"},
    {768, 128, 73, false, false, "T1 lm_head dx x1"},
    {73, 128, 768, true, false, "T1 lm_head dW x1"},
    // the fused attention kernel, per head: T1 (T 64, 48 heads) and T5 (T 64, 256, 1,024, 4 heads);
    // the tiled kernel's tiles on the diagonal of T5 at T 64 are the same products
    {64, 64, 32, false, true, "T1 fused q.kT, dP x384; T5 T64 fused x8, tiled x12 (T256 x12, T1024 x48)"},
    {64, 32, 64, false, false, "T1 fused p.v, dq x384; T5 T64 fused x8, tiled x8 (T256 x8, T1024 x32)"},
    {64, 32, 64, true, false, "T1 fused dv, dk x384; T5 T64 fused x8, tiled x8 (T256 x8, T1024 x32)"},
    {256, 256, 32, false, true, "T5 T256 fused q.kT, dP x8"},
    {256, 32, 256, false, false, "T5 T256 fused p.v, dq x8"},
    {256, 32, 256, true, false, "T5 T256 fused dv, dk x8"},
    {1024, 1024, 32, false, true, "T5 T1024 fused q.kT, dP x8"},
    {1024, 32, 1024, false, false, "T5 T1024 fused p.v, dq x8"},
    {1024, 32, 1024, true, false, "T5 T1024 fused dv, dk x8"},
    // the tiled kernel's tiles (nn/attention/tiled.cpp): forward 64 queries x up to 256 keys,
    // backward up to 256 queries x 64 keys; the shorter ones end or start on the diagonal
    {64, 256, 32, false, true, "T5 tiled fwd S: T256 x4, T1024 x112"},
    {64, 192, 32, false, true, "T5 tiled fwd S: T256 x4, T1024 x16"},
    {64, 128, 32, false, true, "T5 tiled fwd S: T256 x4, T1024 x16"},
    {64, 32, 256, false, false, "T5 tiled fwd p.v: T256 x4, T1024 x112"},
    {64, 32, 192, false, false, "T5 tiled fwd p.v: T256 x4, T1024 x16"},
    {64, 32, 128, false, false, "T5 tiled fwd p.v: T256 x4, T1024 x16"},
    {256, 64, 32, false, true, "T5 tiled bwd S, dP: T256 x8, T1024 x224"},
    {192, 64, 32, false, true, "T5 tiled bwd S, dP: T256 x8, T1024 x32"},
    {128, 64, 32, false, true, "T5 tiled bwd S, dP: T256 x8, T1024 x32"},
    {64, 32, 256, true, false, "T5 tiled bwd dv, dk: T256 x8, T1024 x224"},
    {64, 32, 192, true, false, "T5 tiled bwd dv, dk: T256 x8, T1024 x32"},
    {64, 32, 128, true, false, "T5 tiled bwd dv, dk: T256 x8, T1024 x32"},
    {256, 32, 64, false, false, "T5 tiled bwd dq: T256 x4, T1024 x112"},
    {192, 32, 64, false, false, "T5 tiled bwd dq: T256 x4, T1024 x16"},
    {128, 32, 64, false, false, "T5 tiled bwd dq: T256 x4, T1024 x16"},
    // the BPE model's head: a Linear 128 -> 4,096 on 768 rows
    {768, 4096, 128, false, true, "BPE lm_head fwd x1"},
    {768, 128, 4096, false, false, "BPE lm_head dx x1"},
    {4096, 128, 768, true, false, "BPE lm_head dW x1"},
};

std::string shape_name(const Shape& s) {
    return std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + "_" + (s.ta ? "T" : "N") +
           (s.tb ? "T" : "N");
}

// One shape's operands, stored densely (leading dimension = stored row length), uniform in [-1, 1).
struct Operands {
    Shape s;
    std::size_t lda, ldb, ldc;
    std::vector<float> A, B, C, bt;  // bt: libxsmm's Bᵀ (K, N) when tb
    libxsmm_smmfunction kernel = nullptr;

    explicit Operands(const Shape& shape) : s(shape) {
        lda = s.ta ? s.M : s.K;
        ldb = s.tb ? s.K : s.N;
        ldc = s.N;
        std::mt19937 gen(unsigned(s.M * 7 + s.N * 3 + s.K));
        std::uniform_real_distribution<float> u(-1, 1);
        A.resize(s.M * s.K);
        B.resize(s.K * s.N);
        C.assign(s.M * s.N, 0);
        for (float& v : A) v = u(gen);
        for (float& v : B) v = u(gen);
        if (s.tb) bt.resize(s.K * s.N);
        // Column-major Cᵀ (N, M) = op(B)ᵀ (N, K) · op(A)ᵀ (K, M): B (or bt) is libxsmm's first operand,
        // plain; A its second, transposed when our A is.
        const libxsmm_blasint m = libxsmm_blasint(s.N), n = libxsmm_blasint(s.M), k = libxsmm_blasint(s.K);
        const libxsmm_blasint la = libxsmm_blasint(s.N), lb = libxsmm_blasint(lda), lc = libxsmm_blasint(ldc);
        const float alpha = 1, beta = 0;
        const int flags = s.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
        kernel = libxsmm_smmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, nullptr);
    }
};

using Gemm = void (*)(Operands&);

void openblas(Operands& o) {
    const Shape& s = o.s;
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.M), int(s.N),
                int(s.K), 1.0f, o.A.data(), int(o.lda), o.B.data(), int(o.ldb), 0.0f, o.C.data(), int(o.ldc));
}

void libxsmm(Operands& o) {
    const float* b = o.B.data();
    if (o.s.tb) {  // B (N, K) row-major is column-major (K, N): out-of-place into bt, column-major (N, K)
        libxsmm_otrans(o.bt.data(), o.B.data(), sizeof(float), libxsmm_blasint(o.s.K), libxsmm_blasint(o.s.N),
                       libxsmm_blasint(o.ldb), libxsmm_blasint(o.s.N));
        b = o.bt.data();
    }
    o.kernel(b, o.A.data(), o.C.data());
}

void blis(Operands& o) {
    gemm_shapes::blis_gemm(o.s.ta, o.s.tb, o.s.M, o.s.N, o.s.K, o.A.data(), o.lda, o.B.data(), o.ldb, o.C.data(),
                           o.ldc);
}

void xgrad_gemm(Operands& o) {
    xgrad::gemm(o.s.ta, o.s.tb, o.s.M, o.s.N, o.s.K, 1, o.A.data(), o.lda, o.B.data(), o.ldb, 0, o.C.data(), o.ldc);
}

struct Library {
    const char* name;
    Gemm gemm;
};
const Library kLibraries[] = {{"openblas", openblas}, {"libxsmm", libxsmm}, {"blis", blis}, {"xgrad", xgrad_gemm}};

// C_ref = op(A)·op(B) in double, loop order (i, k, j) so the inner loop runs along B's rows when
// B is plain.
std::vector<double> reference(const Operands& o) {
    const Shape& s = o.s;
    std::vector<double> c(s.M * s.N, 0.0);
    for (std::size_t i = 0; i < s.M; ++i)
        for (std::size_t k = 0; k < s.K; ++k) {
            const double a = s.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k];
            double* row = c.data() + i * s.N;
            if (s.tb)
                for (std::size_t j = 0; j < s.N; ++j) row[j] += a * o.B[j * o.ldb + k];
            else
                for (std::size_t j = 0; j < s.N; ++j) row[j] += a * o.B[k * o.ldb + j];
        }
    return c;
}

// Every library on every shape against the double-precision product; false (and a message) on
// the first one past 1e-4 of max |C_ref|, or on a shape libxsmm has no kernel for.
bool all_agree() {
    for (const Shape& s : kShapes) {
        Operands o(s);
        if (!o.kernel) {
            std::fprintf(stderr, "gemm_shapes: libxsmm has no kernel for %s\n", shape_name(s).c_str());
            return false;
        }
        const std::vector<double> ref = reference(o);
        double scale = 0;
        for (double v : ref) scale = std::max(scale, std::abs(v));
        for (const Library& lib : kLibraries) {
            std::fill(o.C.begin(), o.C.end(), 1e30f);  // beta = 0 must overwrite every element
            lib.gemm(o);
            double err = 0;
            for (std::size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(double(o.C[i]) - ref[i]));
            if (!(err <= 1e-4 * scale)) {
                std::fprintf(stderr, "gemm_shapes: %s on %s: max |C - C_ref| = %g, over 1e-4 x max |C_ref| = %g\n",
                             lib.name, shape_name(s).c_str(), err, 1e-4 * scale);
                return false;
            }
        }
    }
    return true;
}

// libblis exports cblas_sgemm too: the name must resolve to OpenBLAS's, for the openblas rows and
// for xgrad::gemm (gemm_shapes_blis.cpp opens libblis without adding its names to the program's).
bool cblas_is_openblas() {
    Dl_info info{};
    void* f = dlsym(RTLD_DEFAULT, "cblas_sgemm");
    if (f && dladdr(f, &info) && info.dli_fname && std::strstr(info.dli_fname, "openblas")) return true;
    std::fprintf(stderr, "gemm_shapes: cblas_sgemm resolves to %s, not OpenBLAS\n",
                 info.dli_fname ? info.dli_fname : "(nothing)");
    return false;
}

void run(benchmark::State& state, const Shape& s, Gemm gemm) {
    Operands o(s);
    gemm(o);  // warm: first-touch of C, libxsmm's and OpenBLAS's buffers
    for (auto _ : state) {
        gemm(o);
        benchmark::DoNotOptimize(o.C.data());
        benchmark::ClobberMemory();
    }
    state.counters["GFLOPs"] =
        benchmark::Counter(2e-9 * double(s.M) * double(s.N) * double(s.K), benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(s.uses);
}

}  // namespace

int main(int argc, char** argv) {
    xgrad::set_num_threads(1);  // xgrad's pool and OpenBLAS: 1 thread
    openblas_set_num_threads(1);
    try {
        gemm_shapes::blis_one_thread();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    libxsmm_init();
    if (!cblas_is_openblas() || !all_agree()) return 1;
    for (const Shape& s : kShapes)
        for (const Library& lib : kLibraries)
            benchmark::RegisterBenchmark(("W7/" + std::string(lib.name) + "/" + shape_name(s)).c_str(),
                                         [&s, &lib](benchmark::State& st) { run(st, s, lib.gemm); })
                ->UseRealTime();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    libxsmm_finalize();
    return 0;
}
