// core/parallel.hpp — xgrad's own threads: one persistent pool, and parallel_for over it.
// Legend: n items (rows, heads, elements), T threads, chunk t = the items [t·n/T, (t+1)·n/T).
//
// T = 1 unless set_num_threads (core/threads.hpp) or set_pool_threads changes it. A persistent
// pool, not a std::thread per op. Each chunk runs on whichever thread claims it first, so a
// worker that another process keeps off its core holds no loop up; idle workers give their core
// away (core/parallel.cpp). A child made by fork() has none of the parent's workers: it runs on
// T = 1 until it sets T again. A body that forks: its child must exec or _exit, not return into
// the loop, whose other chunks run on threads the child does not have.
// Determinism: chunks depend only on n and T, so a fixed T gives bit-identical results. A body
// that reduces keeps one partial per chunk and adds them in chunk order.
#pragma once

#include <cstddef>
#include <functional>

namespace xgrad {

// The number of threads xgrad's parallel loops use (1 unless set_pool_threads changed it).
int get_pool_threads();

// Sizes the pool to n threads, the caller included, leaving OpenBLAS's as they are
// (set_num_threads sets both). Waits for a running parallel_for on another thread. The new
// pool is built before the old one goes, so a failure leaves the old one working. Prints one
// warning per process on stderr if n > std::thread::hardware_concurrency() (allowed).
// Throws ValueError for n < 1, from inside a parallel_for body, or when the system cannot
// start n threads (naming n and the system's reason).
void set_pool_threads(int n);

// Calls body(begin, end) on the T disjoint chunks of [0, n), each on the first thread free to
// claim it (the caller included), and returns when all are done. body(0, n) runs on the caller
// alone when n < 2·grain, T = 1, nested, or while another thread holds the pool. If chunks
// throw, all still finish and the first exception in chunk order is rethrown.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

// Elementwise loops: f(i0, i1) on ranges cut at multiples of 64 (whole SIMD registers, so the
// thread count never changes the values); under 32,768 values stay on one thread.
template <class F>
void parallel_for_values(std::size_t n, F&& f) {
    constexpr std::size_t kBlock = 64, kGrainBlocks = 256;
    parallel_for((n + kBlock - 1) / kBlock, kGrainBlocks, [&](std::size_t b0, std::size_t b1) {
        f(b0 * kBlock, b1 * kBlock < n ? b1 * kBlock : n);
    });
}

}  // namespace xgrad
