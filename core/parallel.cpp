// core/parallel.cpp — the persistent thread pool behind parallel_for (see core/parallel.hpp).
//
// The handoff, for one parallel_for on T threads (T - 1 workers):
//   caller: writes the task, sets pending = T - 1, bumps `generation` (release), wakes sleepers,
//           runs chunk 0, then waits until pending = 0 (acquire).
//   worker: waits until `generation` differs from the last one it ran (spinning first, then
//           sleeping on the condition variable), runs its chunk, decrements pending (release).
// The release/acquire pairs publish the task and the results (checked by the XGRAD_TSAN build).
//
// The pool's lifetime, all under one owner mutex:
//   parallel_for   takes the pool only if the mutex is free, and reads the pool under it;
//   resize         builds the new pool first, so a thread the system refuses leaves the old
//                  one as it was, then replaces it;
//   fork()         waits for the mutex (pthread_atfork); the child, whose workers did not
//                  survive, abandons the pool unjoined and runs on 1 thread.
#include <xgrad/core/parallel.hpp>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <xgrad/core/error.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define XGRAD_CPU_RELAX() _mm_pause()
#else
#define XGRAD_CPU_RELAX() ((void)0)
#endif

namespace xgrad {

namespace {

// How long a worker spins before it sleeps, in _mm_pause iterations: enough to catch the next op.
constexpr int kSpinIterations = 20000;

// True on a thread while it runs a parallel_for body: a nested parallel_for then runs inline.
thread_local bool t_in_body = false;

class Pool {
public:
    // All or nothing: if a thread cannot start (std::system_error), the ones already started
    // are stopped and joined before the exception leaves, since they wait on wake_.
    explicit Pool(int threads) {
        workers_.reserve(std::size_t(threads - 1));
        try {
            for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
        } catch (...) {
            stop_and_join();
            throw;
        }
    }
    ~Pool() { stop_and_join(); }
    int threads() const { return int(workers_.size()) + 1; }

    // Runs task(t) for t = 0 .. threads() - 1: t = 0 here, the others on the workers.
    void run(const std::function<void(int)>& task) {
        task_ = &task;
        pending_.store(int(workers_.size()), std::memory_order_relaxed);
        {
            // Under the lock, so a worker about to sleep cannot miss the new generation.
            std::lock_guard<std::mutex> lock(mutex_);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        task(0);
        for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
            if (spins < kSpinIterations) XGRAD_CPU_RELAX();
            else std::this_thread::yield();  // a worker was descheduled: give it the core
        }
        task_ = nullptr;
    }

private:
    void stop_and_join() {
        stop_.store(true, std::memory_order_relaxed);  // published by the release below
        {
            std::lock_guard<std::mutex> lock(mutex_);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        for (auto& w : workers_) w.join();
    }

    void work(int t) {
        t_in_body = true;
        std::uint64_t seen = 0;
        for (;;) {
            std::uint64_t g = generation_.load(std::memory_order_acquire);
            for (int spins = 0; g == seen && spins < kSpinIterations; ++spins) {
                XGRAD_CPU_RELAX();
                g = generation_.load(std::memory_order_acquire);
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
                g = generation_.load(std::memory_order_acquire);
            }
            seen = g;
            if (stop_.load(std::memory_order_relaxed)) return;
            (*task_)(t);
            pending_.fetch_sub(1, std::memory_order_release);
        }
    }

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    const std::function<void(int)>* task_ = nullptr;
    std::atomic<bool> stop_{false};
};

std::unique_ptr<Pool>& pool() {
    static std::unique_ptr<Pool> p;
    return p;
}
std::atomic<int> g_threads{1};

// Held by the thread whose parallel_for owns the pool, by a resize, and across fork().
std::mutex g_pool_owner;

// Set once a pool larger than the hardware has been reported (once per process).
std::atomic<bool> g_warned{false};

// fork() copies only the calling thread. Before it, take the owner mutex, so that no loop is
// running on the pool and no resize is half done; a thread inside a body already holds it or
// waits for one that does, so it forks without (forking there is not supported).
thread_local bool t_locked_for_fork = false;
void before_fork() {
    t_locked_for_fork = !t_in_body;
    if (t_locked_for_fork) g_pool_owner.lock();
}
void after_fork_in_parent() {
    if (t_locked_for_fork) g_pool_owner.unlock();
}
// The child's copy of the pool names workers the child does not have: joining them would wait
// forever, so it is left unjoined (and reachable), and the child runs on 1 thread. As caffe2's
// pthreadpool, which abandons a pool inherited through fork.
Pool* g_pool_of_parent = nullptr;
void after_fork_in_child() {
    g_pool_of_parent = pool().release();
    g_threads.store(1, std::memory_order_relaxed);
    g_warned.store(false, std::memory_order_relaxed);  // a new process
    if (t_locked_for_fork) g_pool_owner.unlock();
}

// Workers spin between tasks, so more threads than the hardware runs at once take cores from
// each other. Allowed, as in PyTorch, but reported once on stderr.
void warn_if_oversubscribed(int n) {
    const unsigned hw = std::thread::hardware_concurrency();  // 0 if unknown
    if (hw == 0 || unsigned(n) <= hw || g_warned.exchange(true)) return;
    fmt::print(stderr, "xgrad: warning: a pool of {} threads, more than the {} hardware threads "
                       "std::thread::hardware_concurrency() reports; its workers spin between tasks and will take "
                       "cores from each other\n", n, hw);
}

}  // namespace

int get_pool_threads() { return g_threads.load(std::memory_order_relaxed); }

void set_pool_threads(int n) {
    check(n >= 1, "set_pool_threads", "thread count must be >= 1; got {}", n);
    check(!t_in_body, "set_pool_threads", "called from inside a parallel_for body");
    // The fork handlers, registered with the first resize: before it there is no pool to reset.
    static const int atfork = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    (void)atfork;
    // Waits until no other thread's parallel_for is using the pool it is about to replace.
    std::lock_guard<std::mutex> owner(g_pool_owner);
    const int old = g_threads.load(std::memory_order_relaxed);
    if (n == old) return;
    warn_if_oversubscribed(n);
    std::unique_ptr<Pool> next;
    try {
        if (n > 1) next = std::make_unique<Pool>(n);
    } catch (const std::exception& e) {  // std::system_error from std::thread, or std::bad_alloc
        throw ValueError(fmt::format("set_pool_threads: could not start {} threads: {} (a limit on threads or on "
                                     "address space: ulimit -u, ulimit -v); the pool keeps its {} thread{}",
                                     n, e.what(), old, old == 1 ? "" : "s"));
    }
    pool() = std::move(next);  // joins the old workers
    g_threads.store(n, std::memory_order_relaxed);
}

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body) {
    std::unique_lock<std::mutex> owner(g_pool_owner, std::defer_lock);
    // The thread count is read before the lock only to skip it on 1 thread; a resize may
    // remove the pool between that read and the lock, so the pool itself is read under it.
    if (t_in_body || n < 2 * std::max<std::size_t>(grain, 1) || get_pool_threads() == 1 || !owner.try_lock() ||
        !pool()) {
        if (n > 0) body(0, n);
        return;
    }
    const std::size_t T = std::size_t(pool()->threads());
    // Chunk t = [t·n/T, (t+1)·n/T). Exceptions are kept per chunk; the first in chunk order is
    // rethrown once all are done, so no worker outlives the body's frame.
    std::vector<std::exception_ptr> errors(T);
    struct InBody {  // marks this thread as inside a body until the chunks are done, however they end
        InBody() { t_in_body = true; }
        ~InBody() { t_in_body = false; }
    };
    {
        InBody in_body;
        pool()->run([&](int t) {
            const std::size_t begin = std::size_t(t) * n / T, end = (std::size_t(t) + 1) * n / T;
            if (begin >= end) return;
            try {
                body(begin, end);
            } catch (...) {
                errors[std::size_t(t)] = std::current_exception();
            }
        });
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace xgrad
