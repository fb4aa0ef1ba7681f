// core/parallel.cpp — the persistent thread pool behind parallel_for (see core/parallel.hpp).
//
// The handoff, for one parallel_for on T threads (T - 1 workers):
//   caller: writes the task, opens a round (claim = round·2³² + chunk 0), wakes sleeping workers,
//           claims and runs chunks as a worker does, then waits until all T are done.
//   worker: waits for a new round, then claims chunks (compare-and-swap on claim: chunk k + 1 is
//           next) and runs them until none is left.
// A chunk runs on whichever thread claims it first, so a worker kept off its core by another
// process holds no loop up: the caller claims its chunk. Chunks are fixed by n and T, so the
// results do not depend on which thread runs which. Waiting threads give their core away, as
// OpenMP runtimes do (GOMP_SPINCOUNT, OMP_WAIT_POLICY): see kWorkerPause and kCallerPause.
// Memory order: the round's store and the claim's acquire publish the task, done's increments the
// results; two seq_cst pairs (claim and sleepers, done and caller_sleeping) lose no wake-up.
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
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <xgrad/core/detail/fork.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/error.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define XGRAD_CPU_RELAX() _mm_pause()
#else
#define XGRAD_CPU_RELAX() ((void)0)
#endif

namespace xgrad {

namespace {

// A waiting worker pauses on its core this long (most gaps between the loops of a step are
// shorter), then calls sched_yield until kWorkerSpin has passed (back at once on an idle core,
// the core handed over otherwise), then sleeps on a condition variable.
constexpr std::chrono::microseconds kWorkerPause{10}, kWorkerSpin{1000};
// A caller waiting for the workers' chunks pauses for kCallerPause, yields its core until
// kCallerWait has passed (a worker may be waiting for it), then sleeps until the last wakes it.
constexpr std::chrono::microseconds kCallerPause{50}, kCallerWait{300};

using Clock = std::chrono::steady_clock;

// True on a thread while it runs a parallel_for body: a nested parallel_for then runs inline.
thread_local bool t_in_body = false;

// Waits until done() or `budget` has passed, and returns done(): pausing on the core for the
// first `pausing`, then yielding it.
template <class Done>
bool spin_until(Done done, std::chrono::microseconds pausing, std::chrono::microseconds budget) {
    const Clock::time_point start = Clock::now();
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (done()) return true;
            XGRAD_CPU_RELAX();
        }
        const auto spent = Clock::now() - start;
        if (spent >= budget) return done();
        if (spent >= pausing) std::this_thread::yield();
    }
}

class Pool {
public:
    // All or nothing: if a thread cannot start (std::system_error), the ones already started
    // are stopped and joined before the exception leaves, since they wait on wake_.
    explicit Pool(int threads) : threads_(threads) {
        workers_.reserve(std::size_t(threads - 1));
        try {
            for (int t = 1; t < threads; ++t)
                workers_.emplace_back([this, t] {
                    profiler::detail::name_this_thread(fmt::format("pool worker {}", t).c_str());  // the trace's lane
                    work();
                });
        } catch (...) {
            stop_and_join();
            throw;
        }
    }
    ~Pool() { stop_and_join(); }
    int threads() const { return threads_; }

    // Runs task(c) once for each chunk c = 0 .. threads() - 1, on this thread and the workers,
    // whichever claims c first.
    void run(const std::function<void(int)>& task) {
        task_ = &task;
        done_.store(0, std::memory_order_relaxed);
        ++round_;
        publish(round_ << 32);  // chunk 0 of round_ is the next to claim
        run_chunks(round_);
        const auto all_done = [&] { return done_.load() == threads_; };  // seq_cst: see caller_sleeping_
        if (!spin_until(all_done, kCallerPause, kCallerWait)) {
            caller_sleeping_.store(true);  // seq_cst, against the worker's fetch_add then load
            std::unique_lock<std::mutex> lock(mutex_);
            finished_.wait(lock, all_done);
            caller_sleeping_.store(false, std::memory_order_relaxed);
        }
        task_ = nullptr;
    }

private:
    static constexpr std::uint64_t kChunkBits = 0xffffffff;

    // Opens a round to the workers: stores claim_ = (round << 32) | first chunk, and wakes the
    // sleeping ones.
    void publish(std::uint64_t claim) {
        claim_.store(claim);  // seq_cst, against the sleeper's fetch_add then load
        if (sleepers_.load() > 0) {
            std::lock_guard<std::mutex> lock(mutex_);
            wake_.notify_all();
        }
    }

    // Claims chunks of `round` one at a time and runs them, until none is left.
    void run_chunks(std::uint64_t round) {
        std::uint64_t c = claim_.load(std::memory_order_acquire);
        while ((c >> 32) == round && int(c & kChunkBits) < threads_) {
            if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                continue;  // c now holds the current value
            (*task_)(int(c & kChunkBits));
            if (done_.fetch_add(1) + 1 == threads_ && caller_sleeping_.load()) {
                std::lock_guard<std::mutex> lock(mutex_);
                finished_.notify_one();
            }
            c = claim_.load(std::memory_order_acquire);
        }
    }

    void stop_and_join() {
        stop_.store(true, std::memory_order_relaxed);  // published by the store below
        publish(((round_ + 1) << 32) | std::uint64_t(threads_));  // a new round with nothing to claim
        for (auto& w : workers_) w.join();
    }

    // The round after `seen`, once the caller opens it: spins first, then sleeps.
    std::uint64_t next_round(std::uint64_t seen) {
        const auto opened = [&] { return (claim_.load() >> 32) != seen; };  // seq_cst: see sleepers_
        if (!spin_until(opened, kWorkerPause, kWorkerSpin)) {
            sleepers_.fetch_add(1);  // seq_cst, against publish's store then load
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, opened);
            sleepers_.fetch_sub(1);
        }
        return claim_.load(std::memory_order_acquire) >> 32;
    }

    void work() {
        t_in_body = true;
        std::uint64_t seen = 0;
        for (;;) {
            seen = next_round(seen);
            if (stop_.load(std::memory_order_relaxed)) return;
            run_chunks(seen);
        }
    }

    const int threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, finished_;
    std::atomic<std::uint64_t> claim_{0};  // (round << 32) | the next chunk to claim
    std::atomic<int> done_{0};              // chunks of the round finished
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::uint64_t round_ = 0;               // the caller's
    const std::function<void(int)>* task_ = nullptr;
    std::atomic<bool> stop_{false};
};

// Never destroyed, not even at exit: a worker calling exit() from its chunk would be joined to
// itself (std::system_error, abort), and a thread still in a loop as the program ends would have
// the pool destroyed under it. Its workers end with the process. A resize replaces it whole.
std::unique_ptr<Pool>& pool() {
    static auto* const p = new std::unique_ptr<Pool>();
    return *p;
}
std::atomic<bool> g_fork_handler_registered{false};
std::atomic<int> g_threads{1};

// Held by the thread whose parallel_for owns the pool, by a resize, and across fork().
std::mutex g_pool_owner;

// Set once a pool larger than the hardware has been reported (once per process).
std::atomic<bool> g_warned{false};

// fork() (core/detail/fork.hpp): take the owner mutex, so that no loop is running on the pool
// and no resize is half done. A thread inside a body already holds it or waits for one that
// does: it forks without it, and its child must exec or _exit (core/parallel.hpp).
thread_local bool t_locked_for_fork = false;
void before_fork() {
    xgrad_detail::backward_fork_announce();
    t_locked_for_fork = !t_in_body;
    if (t_locked_for_fork) g_pool_owner.lock();
    xgrad_detail::backward_fork_hold();
}
void after_fork_in_parent() {
    xgrad_detail::backward_fork_release_in_parent();
    if (t_locked_for_fork) g_pool_owner.unlock();
}
// The child's copy of the pool names workers the child does not have: joining them would wait
// forever, so it is left unjoined (and reachable), and the child runs on 1 thread. As caffe2's
// pthreadpool, which abandons a pool inherited through fork.
Pool* g_pool_of_parent = nullptr;
void after_fork_in_child() {
    xgrad_detail::backward_fork_reset_in_child();
    g_pool_of_parent = pool().release();
    g_threads.store(1, std::memory_order_relaxed);
    g_warned.store(false, std::memory_order_relaxed);  // a new process
    if (t_locked_for_fork) g_pool_owner.unlock();
}

// More threads than the hardware runs at once take turns on the cores, and a loop waits for its
// last chunk. Allowed, as in PyTorch, but reported once on stderr.
void warn_if_oversubscribed(int n) {
    const unsigned hw = std::thread::hardware_concurrency();  // 0 if unknown
    if (hw == 0 || unsigned(n) <= hw || g_warned.exchange(true)) return;
    fmt::print(stderr, "xgrad: warning: a pool of {} threads, more than the {} hardware threads "
                       "std::thread::hardware_concurrency() reports; they will take turns on the cores, and each "
                       "loop waits for its last chunk\n", n, hw);
}

}  // namespace

// An atomic flag, no lock: a fork() in another thread during the first registration must not
// leave the child a lock held. Of two first callers, one registers, and the other may run its
// first loop or backward before the handler exists, as it could before either call.
void xgrad_detail::register_fork_handler() {
    if (g_fork_handler_registered.exchange(true)) return;
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

int get_pool_threads() { return g_threads.load(std::memory_order_relaxed); }

void set_pool_threads(int n) {
    check(n >= 1, "set_pool_threads", "thread count must be >= 1; got {}", n);
    check(!t_in_body, "set_pool_threads", "called from inside a parallel_for body");
    xgrad_detail::register_fork_handler();  // with the first resize: before it there is no pool to reset
    // Waits until no other thread's parallel_for is using the pool it is about to replace.
    std::lock_guard<std::mutex> owner(g_pool_owner);
    const int old = g_threads.load(std::memory_order_relaxed);
    if (n == old) return;
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
    warn_if_oversubscribed(n);  // once the pool runs: a refused one is reported by its exception alone
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
    // Chunk t = [t·n/T, (t+1)·n/T). With n = q·T + r, t·n/T = t·q + t·r/T (floors): the same
    // bound without the product t·n, which overflows 64 bits for n near SIZE_MAX.
    const std::size_t q = n / T, r = n % T;
    const auto bound = [&](std::size_t t) { return t * q + t * r / T; };
    // Exceptions are kept per chunk; the first in chunk order is rethrown once all are done, so
    // no worker outlives the body's frame.
    std::vector<std::exception_ptr> errors(T);
    struct InBody {  // marks this thread as inside a body until the chunks are done, however they end
        InBody() { t_in_body = true; }
        ~InBody() { t_in_body = false; }
    };
    // While profiling, a worker's chunks are events named after the caller's op, in the worker's
    // lane of the caller's phase (a backward's loop in the worker's backward lane).
    const std::string op = profiler::detail::active() ? profiler::detail::innermost_name() : std::string();
    const profiler::Lane lane = op.empty() ? profiler::Lane::forward : profiler::detail::lane();
    const std::thread::id caller = std::this_thread::get_id();
    {
        InBody in_body;
        pool()->run([&](int t) {
            const std::size_t begin = bound(std::size_t(t)), end = bound(std::size_t(t) + 1);
            if (begin >= end) return;
            const bool profiled = !op.empty() && std::this_thread::get_id() != caller;
            std::optional<profiler::LaneGuard> callers_lane;
            if (profiled) callers_lane.emplace(lane);
            const profiler::detail::Scope event{profiled ? profiler::detail::begin(op, profiler::Kind::worker)
                                                         : profiler::detail::Handle{}};
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
