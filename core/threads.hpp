// core/threads.hpp — how many threads xgrad uses, for the whole process: its own pool
// (core/parallel.hpp) and OpenBLAS's. As torch.set_num_threads / torch.get_num_threads.
#pragma once

namespace xgrad {

// Sets xgrad's pool to n threads, the caller included (parallel_for; large gemms are split into
// bands over it, core/blas.cpp), and OpenBLAS to 1 thread, so that the two never compete for the
// cores. Process-wide: every later op, on every thread, uses that count.
// A program that never calls it runs xgrad's loops on 1 thread and OpenBLAS on its own default
// (OPENBLAS_NUM_THREADS, else one thread per core). The examples' --threads calls it (1 by default).
// Use n no larger than the idle cores: a pool worker spins for a while after each task. Changing
// n while another thread trains changes that run's split, and with it possibly its last bits.
// Throws ValueError for n < 1, or when called from inside a parallel_for body.
void set_num_threads(int n);

// The number of threads xgrad's pool uses: 1 until set_num_threads (or set_pool_threads) changes it.
int get_num_threads();

}  // namespace xgrad
