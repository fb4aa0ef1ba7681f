// core/parallel.hpp — xgrad's own threads: one persistent pool, and parallel_for over it.
//
// Legend: n items (rows, heads, elements), T threads, chunk t = the items [t·n/T, (t+1)·n/T).
//
// T = 1 unless set_num_threads (core/threads.hpp) or set_pool_threads changes it; parallel_for
// then calls its body once, on the caller's thread. A persistent pool, not a thread per op: a
// std::thread per op pays a clone and a join each time. Workers spin briefly after each task (the
// next handoff is then one atomic store and load), then sleep on a condition variable.
// Determinism: chunks depend only on n and T, so a fixed T gives bit-identical results from run
// to run. (Two application threads calling parallel_for at once: one gets the pool, the other
// runs its loop whole, so a split-dependent result such as a banded gemm may differ in its last
// bits.) A body that reduces keeps one partial per chunk and adds them in chunk order.
#pragma once

#include <cstddef>
#include <functional>

namespace xgrad {

// The number of threads xgrad's parallel loops use (1 unless set_pool_threads changed it).
int get_pool_threads();

// Sizes the pool to n threads, the caller included (n - 1 workers), for the whole process,
// leaving OpenBLAS's threads as they are (set_num_threads, core/threads.hpp, sets both). Waits
// for a parallel_for running on another thread to finish first.
// Throws ValueError for n < 1, or when called from inside a parallel_for body.
void set_pool_threads(int n);

// Calls body(begin, end) on the disjoint chunks of [0, n), one per thread, and returns when all
// are done; the caller runs chunk 0. A body writes only its own chunk's memory. body(0, n) runs
// on the caller alone when n < 2·grain (grain in items), T = 1, nested in another body, or while
// another thread's parallel_for holds the pool. Empty chunks (n < T) are skipped. If chunks
// throw, all still run to their end and the first exception in chunk order is rethrown.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

// For elementwise loops over n values: f(i0, i1) on ranges cut at multiples of 64 (whole SIMD
// registers, so the thread count never changes which values the vector loop computes); fewer
// than 2 · 256 blocks (32,768 values) stay on one thread. Used by tanh and the Adam update.
template <class F>
void parallel_for_values(std::size_t n, F&& f) {
    constexpr std::size_t kBlock = 64, kGrainBlocks = 256;
    parallel_for((n + kBlock - 1) / kBlock, kGrainBlocks, [&](std::size_t b0, std::size_t b1) {
        f(b0 * kBlock, b1 * kBlock < n ? b1 * kBlock : n);
    });
}

}  // namespace xgrad
