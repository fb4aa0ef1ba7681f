// core/threads.hpp — how many threads xgrad uses, for the whole process: its own pool
// (core/parallel.hpp) and OpenBLAS's. As torch.set_num_threads / torch.get_num_threads.
#pragma once

namespace xgrad {

// Sets xgrad's pool to n threads, the caller included (large gemms are split into bands over
// it), and OpenBLAS to 1 thread, so the two never compete; process-wide. Without a call, xgrad
// runs on 1 thread, and its first matrix product sets OpenBLAS to 1 thread as well.
// Use n no larger than the idle cores: pool workers spin briefly after each task.
// Throws ValueError for n < 1, or when called from inside a parallel_for body.
void set_num_threads(int n);

// The number of threads xgrad's pool uses: 1 until set_num_threads (or set_pool_threads) changes it.
int get_num_threads();

}  // namespace xgrad
