// core/parallel.hpp — xgrad's own threads: one persistent pool, and parallel_for over it.
//
// Legend: n items (rows, heads, elements), T threads (set_pool_threads), chunk t = the items
// [t·n/T, (t+1)·n/T).
//
// Off by default (T = 1: parallel_for calls its body once, on the caller's thread), and not
// switched on by set_num_threads / --threads, because it did not pay where it was measured:
// on the project's 2-vCPU machine under a load average of 17–19 (other builds), gelu,
// softmax and layer_norm ran 0.66–0.75x, 0.18x and 0.13x as fast at T = 2 as at T = 1
// (bench/ T2, `xgrad_bench --pool-threads 2`), and PyTorch's own 2-thread runs of the same
// ops 0.02–0.41x. Measure again on a quiet machine before turning it on.
//
// Why a persistent pool and not a thread per op: a std::thread started and joined per op pays a
// clone and a join every time, and a parked thread woken through the kernel a futex round trip.
// The pool's workers spin for a short while after each task (so the next op's handoff is a store
// and a load of one atomic), then sleep on a condition variable, so an idle process does not burn
// a core. bench/thread_handoff.cpp measures the three, and OpenBLAS's threads, side by side.
//
// Determinism: the chunks depend only on n and T, never on timing, so a fixed T gives the same
// split, and with it bit-identical results, from run to run. A body that reduces (a sum over
// rows) keeps one partial per chunk and adds the partials in chunk order afterwards.
#pragma once

#include <cstddef>
#include <functional>

namespace xgrad {

// The number of threads xgrad's parallel loops use (1 unless set_pool_threads changed it).
int get_pool_threads();

// Sizes the pool to n threads, the caller included (n - 1 workers); OpenBLAS's own threads are
// set by set_num_threads (core/blas.hpp). Throws ValueError for n < 1. Not to be called from
// inside a parallel_for body.
void set_pool_threads(int n);

// Calls body(begin, end) on the chunks of [0, n), one per thread, and returns when all are done;
// the calling thread runs chunk 0. Runs body(0, n) on the calling thread alone when T = 1 or
// n < 2·grain (a chunk smaller than grain items would cost more to hand off than to compute).
// A body must not call parallel_for (no nesting) and must not throw.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

}  // namespace xgrad
