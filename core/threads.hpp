// core/threads.hpp — how many threads xgrad uses, for the whole process: its own pool
// (core/parallel.hpp) and OpenBLAS's. As torch.set_num_threads / torch.get_num_threads.
#pragma once

namespace xgrad {

// Sets xgrad's pool to n threads, the caller included (large gemms are split into bands over
// it), and OpenBLAS to 1 thread, so the two never compete; process-wide. Without a call, xgrad
// runs on 1 thread, and its first matrix product sets OpenBLAS to 1 thread as well.
// Use n up to the cores: a waiting worker yields its core to any thread that wants it, then
// sleeps, and the caller runs the chunks of a worker kept off its core, so a core another
// process takes costs what that core brought, not the pool's whole speed. n above
// std::thread::hardware_concurrency() is allowed but warned about on stderr, once per process.
// Safe while other threads run ops: those find the pool busy or resized and run on their own.
// After fork(), the child runs on 1 thread until it calls set_num_threads (the parent's workers
// do not exist there); a child forked inside a parallel_for body must exec or _exit. Throws ValueError for n < 1, from inside a parallel_for body, or when the
// system cannot start n threads (ulimit -u or -v); the previous pool and count then remain.
void set_num_threads(int n);

// The number of threads xgrad's pool uses: 1 until set_num_threads (or set_pool_threads) changes
// it, and 1 in a forked child until it calls one of them.
int get_num_threads();

}  // namespace xgrad
