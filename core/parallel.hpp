// core/parallel.hpp — xgrad's own threads: one persistent pool, and parallel_for over it.
//
// Legend: n items (rows, heads, elements), T threads (set_pool_threads), chunk t = the items
// [t·n/T, (t+1)·n/T).
//
// T = 1 by default: parallel_for then calls its body once, on the caller's thread. The
// examples' --threads N (set_num_threads, core/blas.hpp) sets T = N and keeps OpenBLAS on one
// thread: large products are split into bands over this pool instead (core/blas.cpp). Measured
// on the project's quiet 2-vCPU machine (bench/thread_handoff): an empty task handed to the
// spinning worker costs 1.3 µs, a std::thread per op 37 µs; the GPT example's products ran
// 1.34-1.71x as fast on 2 OpenBLAS threads as on one, and 1.85-2.03x split into bands here. (An
// earlier measurement under a load average of 17-19 found every form slower at 2 threads: a
// spinning worker then waits for a time slice, not for work.)
//
// Why a persistent pool and not a thread per op: a std::thread started and joined per op pays a
// clone and a join every time, and a parked thread woken through the kernel a futex round trip.
// The pool's workers spin for a short while after each task (so the next op's handoff is a store
// and a load of one atomic), then sleep on a condition variable, so an idle process does not burn
// a core. bench/thread_handoff.cpp measures the three, and OpenBLAS's threads, side by side.
//
// Determinism: the chunks depend only on n and T, never on timing, so a fixed T gives the same
// split, and with it bit-identical results, from run to run. (One exception: when two
// application threads call parallel_for at once, which of them gets the pool depends on timing,
// and the other runs its loop whole; an op whose result depends on the split, such as a gemm
// that OpenBLAS computes with another kernel for a band, may then differ in its last bits.) A body that reduces (a sum over
// rows) keeps one partial per chunk and adds the partials in chunk order afterwards.
#pragma once

#include <cstddef>
#include <functional>

namespace xgrad {

// The number of threads xgrad's parallel loops use (1 unless set_pool_threads changed it).
int get_pool_threads();

// Sizes the pool to n threads, the caller included (n - 1 workers), for the whole process.
// OpenBLAS's own threads are left as they are: set_num_threads (core/blas.hpp) sets both, the
// pool to n and OpenBLAS to 1, which is what the examples' --threads does; calling this alone
// with n > 1 and OpenBLAS on several threads oversubscribes the cores. More threads than cores
// waste them: a worker spins for a while after each task (see above).
// Waits for a parallel_for running on another thread to finish first.
// Throws ValueError for n < 1, or when called from inside a parallel_for body.
void set_pool_threads(int n);

// Calls body(begin, end) on the chunks of [0, n), one per thread, at the same time, and returns
// when all are done; the calling thread runs chunk 0. Chunks are disjoint, and a body must write
// only memory that belongs to its own chunk. grain is in items: with n < 2·grain (a chunk
// smaller than grain would cost more to hand off than to compute), with T = 1, inside another
// parallel_for's body (nested), or while another application thread's parallel_for holds the
// pool, body(0, n) runs on the calling thread alone. Empty chunks (n < T) are skipped.
// If chunks throw, every chunk still runs to its end, and the exception of the first throwing
// chunk (in chunk order) is rethrown to the caller; the pool stays usable.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

// For elementwise loops over n values: calls f(i0, i1) on value ranges cut at multiples of 64
// (whole SIMD registers, so a thread count never changes which values the compiler's vector
// loop computes); fewer than 2 · 256 blocks (32,768 values, ~15 µs of simple work) stay on one
// thread. Used by tanh (core/ops.cpp) and the dense Adam update (optim/adam.cpp).
template <class F>
void parallel_for_values(std::size_t n, F&& f) {
    constexpr std::size_t kBlock = 64, kGrainBlocks = 256;
    parallel_for((n + kBlock - 1) / kBlock, kGrainBlocks, [&](std::size_t b0, std::size_t b1) {
        f(b0 * kBlock, b1 * kBlock < n ? b1 * kBlock : n);
    });
}

}  // namespace xgrad
