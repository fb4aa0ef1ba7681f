// bench/thread_handoff.cpp — what it costs to hand work to the second core: the measurement the
// pool's design (core/parallel.hpp) stands on.
//
//   Handoff/*     an empty task for 2 threads: the persistent pool (core/parallel.cpp: a waiting
//                 worker pauses, yields, then sleeps), a std::thread started and joined per op,
//                 and the pool after its worker went to sleep (a pause longer than its wait)
//   Gemm/*        the GPT example's products, B·T = 768 rows, d 128 (c_attn, c_proj, the MLP's
//                 two, the head over V 65), each as one cblas_sgemm on 1 OpenBLAS thread, on
//                 2 OpenBLAS threads, and split by rows over the pool's 2 threads (each half
//                 one single-threaded sgemm); the counter GFLOPs is per second
//
// Run: OPENBLAS_NUM_THREADS=2 thread_handoff [Google Benchmark flags]. OpenBLAS must be allowed
// 2 threads at start (the environment variable) for its 2-thread rows to mean anything.
// Legend: M rows, K inner size, N columns of C (M, N) = A (M, K) · B (K, N).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <thread>
#include <vector>

#include <xgrad/core/parallel.hpp>

namespace {

void Handoff_pool_spinning(benchmark::State& state) {
    xgrad::set_pool_threads(2);
    for (auto _ : state) xgrad::parallel_for(2, 1, [](std::size_t, std::size_t) { benchmark::ClobberMemory(); });
    xgrad::set_pool_threads(1);
}

void Handoff_thread_per_op(benchmark::State& state) {
    for (auto _ : state) {
        std::thread t([] { benchmark::ClobberMemory(); });
        benchmark::ClobberMemory();
        t.join();
    }
}

// The worker sleeps between ops (a 3 ms pause, untimed, is longer than its 1 ms wait): the caller
// wakes it through the kernel's futex, and runs the chunk itself if the worker is late for it.
void Handoff_pool_sleeping(benchmark::State& state) {
    xgrad::set_pool_threads(2);
    for (auto _ : state) {
        state.PauseTiming();
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        state.ResumeTiming();
        xgrad::parallel_for(2, 1, [](std::size_t, std::size_t) { benchmark::ClobberMemory(); });
    }
    xgrad::set_pool_threads(1);
}

// mode 0: 1 OpenBLAS thread; 1: 2 OpenBLAS threads; 2: rows split over the pool's 2 threads
void Gemm(benchmark::State& state) {
    const int M = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2)), mode = int(state.range(3));
    std::vector<float> A(std::size_t(M) * K, 0.5f), B(std::size_t(K) * N, 0.25f), C(std::size_t(M) * N);
    openblas_set_num_threads(mode == 1 ? 2 : 1);
    xgrad::set_pool_threads(mode == 2 ? 2 : 1);
    auto rows = [&](std::size_t r0, std::size_t r1) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(r1 - r0), N, K, 1, A.data() + r0 * K, K,
                    B.data(), N, 0, C.data() + r0 * N, N);
    };
    for (auto _ : state) {
        if (mode == 2) xgrad::parallel_for(std::size_t(M), 1, rows);
        else rows(0, std::size_t(M));
        benchmark::ClobberMemory();
    }
    state.counters["GFLOPs"] = benchmark::Counter(2.0 * M * K * N * double(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
    openblas_set_num_threads(1);
    xgrad::set_pool_threads(1);
}

void gemm_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"M", "K", "N", "mode"});
    const int shapes[][3] = {{768, 128, 384},   // c_attn: x (B·T, d) · Wᵀ (d, 3d)
                             {768, 128, 128},   // c_proj
                             {768, 128, 512},   // MLP up (d → 4d)
                             {768, 512, 128},   // MLP down (4d → d)
                             {768, 128, 65}};   // lm head over the KJV characters
    for (const auto& s : shapes)
        for (int mode = 0; mode < 3; ++mode) b->Args({s[0], s[1], s[2], mode});
}

}  // namespace

BENCHMARK(Handoff_pool_spinning)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(Handoff_thread_per_op)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(Handoff_pool_sleeping)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(Gemm)->Apply(gemm_args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
