// core/detail/fork.hpp — fork() and the engine's own threads (internal; not for users).
//
// fork() copies only the calling thread: a lock another thread held stays locked in the child.
// The pool (core/parallel.cpp) and the threads inside a node's backward (core/autograd.cpp) have
// one pthread_atfork handler between them, whose prepare step runs in this order:
//   1. a fork called from inside a node's backward says so: the others must not wait for it;
//   2. the pool is taken: the running parallel_for ends first (its bodies may run backward,
//      which nothing holds back yet), and no resize is half done;
//   3. new backwards are held back, and the running ones waited for (a loop started meanwhile
//      finds the pool taken and runs on its own thread, so it needs nothing the fork holds).
// The locks registered at load (generator, leaves, BLAS setup) are taken after these, since a
// backward may need them: pthread_atfork runs prepare steps last-registered first.
#pragma once

namespace xgrad {
namespace xgrad_detail {

// Registers the handler, once per process: by the first resize of the pool and the first backward.
void register_fork_handler();

// Steps 1 and 3 and their undoing, in core/autograd.cpp; the handler in core/parallel.cpp calls them.
void backward_fork_announce();           // 1.
void backward_fork_hold();               // 3.
void backward_fork_release_in_parent();  // after fork(), in the parent
void backward_fork_reset_in_child();     // after fork(), in the child

}  // namespace xgrad_detail
}  // namespace xgrad
