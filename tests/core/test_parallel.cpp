// tests/core/test_parallel.cpp — the thread pool of core/parallel.hpp: parallel_for visits every
// index once in contiguous chunks that depend only on n and the thread count, nests, passes an
// exception to its caller, and serves two application threads at once; a resize the system
// refuses keeps the old pool, a forked child computes on one thread, and a pool larger than
// the hardware is reported once; a child forked while another thread holds a lock of the library,
// runs a node's backward or the process's first small product does not hang. Tag [threads]:
// `make tsan` runs these under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/detail/accumulate.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

TEST_CASE("parallel_for visits every index once in contiguous chunks", "[threads][parallel]") {
    ThreadsGuard guard;
    for (int T : {1, 2, 3, 2, 1}) {
        set_pool_threads(T);
        REQUIRE(get_pool_threads() == T);
        for (std::size_t n : {0, 1, 5, 7, 1000}) {
            INFO("threads " << T << ", n " << n);
            std::vector<std::atomic<int>> hits(n);
            std::atomic<int> chunks{0}, empty{0};
            parallel_for(n, /*grain=*/2, [&](std::size_t b, std::size_t e) {  // (Catch2's REQUIRE is
                if (b >= e) ++empty;                                            // not for other threads)
                ++chunks;
                for (std::size_t i = b; i < e; ++i) ++hits[i];
            });
            REQUIRE(empty == 0);  // no empty chunk is handed out
            for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
            // Serial below 2·grain items; otherwise one chunk per thread.
            const int expected = n == 0 ? 0 : (T == 1 || n < 4) ? 1 : T;
            REQUIRE(chunks == expected);
        }
    }
}

TEST_CASE("parallel_for's chunks depend only on n and the thread count", "[threads][parallel]") {
    ThreadsGuard guard;
    set_pool_threads(3);
    for (int rep = 0; rep < 3; ++rep) {
        std::mutex m;
        std::vector<std::pair<std::size_t, std::size_t>> chunks;
        parallel_for(10, 1, [&](std::size_t b, std::size_t e) {
            std::lock_guard<std::mutex> lock(m);
            chunks.emplace_back(b, e);
        });
        std::sort(chunks.begin(), chunks.end());
        // chunk t = [t·10/3, (t+1)·10/3) = [0, 3), [3, 6), [6, 10)
        REQUIRE(chunks == std::vector<std::pair<std::size_t, std::size_t>>{{0, 3}, {3, 6}, {6, 10}});
    }
}

// The chunk bounds t·n/T for n near SIZE_MAX: t·n itself does not fit in 64 bits. The bodies
// only record their ranges; every n of [0, n) is covered once, in the chunks [t·n/T, (t+1)·n/T).
TEST_CASE("parallel_for covers n up to SIZE_MAX without overflow in its chunk bounds",
          "[threads][parallel][regression]") {
    ThreadsGuard guard;
    for (int T : {2, 3}) {
        set_pool_threads(T);
        for (std::size_t n : {SIZE_MAX, std::size_t(1) << 63, SIZE_MAX / 2 + 7}) {
            INFO("threads " << T << ", n " << n);
            std::mutex m;
            std::vector<std::pair<std::size_t, std::size_t>> chunks;
            parallel_for(n, 1, [&](std::size_t b, std::size_t e) {
                std::lock_guard<std::mutex> lock(m);
                chunks.emplace_back(b, e);
            });
            std::sort(chunks.begin(), chunks.end());
            REQUIRE(chunks.size() == std::size_t(T));
            REQUIRE(chunks.front().first == 0);
            REQUIRE(chunks.back().second == n);
            for (std::size_t t = 1; t < chunks.size(); ++t) REQUIRE(chunks[t].first == chunks[t - 1].second);
            // chunk 1's start, floor(n/T) (T·floor(n/T) ≤ n), as the formula gives for small n
            REQUIRE(chunks[1].first == n / std::size_t(T));
        }
    }
}

TEST_CASE("a parallel_for inside a body runs on that body's thread", "[threads][parallel]") {
    ThreadsGuard guard;
    set_pool_threads(2);
    std::mutex m;
    std::vector<std::pair<std::size_t, std::size_t>> inner;  // the inner loops' chunks
    parallel_for(4, 1, [&](std::size_t, std::size_t) {
        parallel_for(100, 1, [&](std::size_t b, std::size_t e) {
            std::lock_guard<std::mutex> lock(m);
            inner.emplace_back(b, e);
        });
    });
    // Two outer chunks, each running its inner loop whole: (0, 100) twice, never split.
    REQUIRE(inner.size() == 2);
    for (const auto& c : inner) REQUIRE(c == std::make_pair(std::size_t(0), std::size_t(100)));
}

TEST_CASE("an exception in a parallel_for body reaches the caller after every chunk has run", "[threads][parallel]") {
    ThreadsGuard guard;
    set_pool_threads(2);
    std::atomic<int> chunks_done{0};
    // Chunk 1 (on the worker) throws; chunk 0 (on the caller) still finishes, and the pool is
    // usable afterwards, with the caller no longer marked as inside a body.
    auto throwing = [&](std::size_t begin, std::size_t) {
        if (begin > 0) throw ValueError("chunk 1 fails");
        chunks_done.fetch_add(1);
    };
    CHECK_THAT(message_of<ValueError>([&] { parallel_for(100, 1, throwing); }), Contains("chunk 1 fails"));
    REQUIRE(chunks_done.load() == 1);
    // Both chunks throw: the first in chunk order wins.
    CHECK_THAT(message_of<ValueError>([&] {
                   parallel_for(100, 1, [](std::size_t begin, std::size_t) {
                       throw ValueError(begin == 0 ? "chunk 0" : "chunk 1");
                   });
               }),
               Contains("chunk 0"));
    std::vector<int> seen(100, 0);
    std::vector<std::pair<std::size_t, std::size_t>> chunks;
    std::mutex m;
    parallel_for(100, 1, [&](std::size_t b, std::size_t e) {
        std::lock_guard<std::mutex> lock(m);
        chunks.emplace_back(b, e);
        for (std::size_t i = b; i < e; ++i) ++seen[i];
    });
    REQUIRE(chunks.size() == 2);  // still split: the caller is not left marked as inside a body
    REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    CHECK_THAT(message_of<ValueError>([] { parallel_for(4, 1, [](std::size_t, std::size_t) { set_pool_threads(1); }); }),
               Contains("inside a parallel_for body"));
}

TEST_CASE("parallel_for called from two application threads at once covers each range once", "[threads][parallel]") {
    ThreadsGuard guard;
    set_pool_threads(2);
    // One caller gets the pool, the other finds it busy and runs its loop alone; either way
    // every index of each loop is visited exactly once.
    std::vector<std::atomic<int>> a(50000), b(50000);
    auto fill = [](std::vector<std::atomic<int>>& v) {
        for (int round = 0; round < 20; ++round)
            parallel_for(v.size(), 1, [&](std::size_t s, std::size_t e) {
                for (std::size_t i = s; i < e; ++i) v[i].fetch_add(1, std::memory_order_relaxed);
            });
    };
    std::thread other([&] { fill(b); });
    fill(a);
    other.join();
    for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].load() == 20);
        REQUIRE(b[i].load() == 20);
    }
}

// The handoff in each of its states: a worker spinning for the next loop (loops back to back), a
// worker asleep (a pause of 5 ms between loops, longer than it spins), and a caller asleep until
// a worker finishes (a chunk that takes 5 ms). Every round covers each index once, in the same
// chunks, whichever thread claims them.
TEST_CASE("parallel_for covers each index once whether its workers spin or sleep", "[threads][parallel]") {
    ThreadsGuard guard;
    for (int T : {2, 3}) {
        set_pool_threads(T);
        for (int round = 0; round < 300; ++round) {
            const bool pause = round % 50 == 49, slow_chunk = round % 50 == 24;
            if (pause) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            std::vector<std::atomic<int>> hits(97);
            std::mutex m;
            std::vector<std::pair<std::size_t, std::size_t>> chunks;
            parallel_for(97, 1, [&](std::size_t b, std::size_t e) {
                if (slow_chunk && b > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                for (std::size_t i = b; i < e; ++i) ++hits[i];
                std::lock_guard<std::mutex> lock(m);
                chunks.emplace_back(b, e);
            });
            INFO("threads " << T << ", round " << round);
            for (std::size_t i = 0; i < hits.size(); ++i) REQUIRE(hits[i] == 1);
            std::sort(chunks.begin(), chunks.end());
            REQUIRE(chunks.size() == std::size_t(T));
            for (std::size_t t = 0; t < chunks.size(); ++t)  // chunk t = [t·97/T, (t+1)·97/T)
                REQUIRE(chunks[t] == std::make_pair(t * 97 / std::size_t(T), (t + 1) * 97 / std::size_t(T)));
        }
    }
}

namespace {

constexpr int kHung = -1;

// Runs child() in a forked copy of this process, which exits with child()'s return value (an
// exception: 100), and waits at most `deadline` for it. Returns the exit code; 128 + the signal's
// number if it died of one; kHung if it was still running at the deadline (it is then killed).
int exit_code_of_child(const std::function<int()>& child,
                       std::chrono::seconds deadline_after = std::chrono::seconds(5)) {
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int code = 100;
        try {
            code = child();
        } catch (...) {
        }
        _exit(code);  // no atexit handlers, no Catch2 report from the child
    }
    const auto deadline = std::chrono::steady_clock::now() + deadline_after;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return kHung;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The number of chunks parallel_for(1000, 1, ...) runs: the number of threads actually serving it.
int chunks_run() {
    std::atomic<int> chunks{0};
    parallel_for(1000, 1, [&](std::size_t, std::size_t) { ++chunks; });
    return chunks.load();
}

// This process's address space in bytes (the first field of /proc/self/statm, in pages).
[[maybe_unused]] std::size_t address_space_bytes() {  // unused under the sanitizers (below)
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    return pages * std::size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

// A child that has 2 threads limits its address space to what it uses plus 64 MiB, then asks for
// 256 threads: 255 stacks (8 MiB each by default) do not fit, so some thread cannot start. The
// resize fails with a ValueError naming 256 and the system's reason; the 2-thread pool still
// serves parallel_for with 2 chunks and gives the same softmax bits. (A pool that threw from
// its constructor left its started workers waiting on a condition variable it destroyed:
// the child hung.) Not under the sanitizers: their shadow memory counts against RLIMIT_AS too.
TEST_CASE("a resize the system refuses throws and keeps the old pool", "[threads][parallel][regression]") {
#if defined(XGRAD_TEST_ASAN) || defined(XGRAD_TEST_TSAN)
    SUCCEED("skipped: a sanitizer's shadow memory would hit the address-space limit first");
#else
    manual_seed(4);
    const Tensor x = randn({64, 512});
    const Array expected = softmax(x, -1).data();
    const int code = exit_code_of_child([&] {
        set_num_threads(2);
        if (chunks_run() != 2) return 1;
        const rlim_t limit = address_space_bytes() + (rlim_t(64) << 20);
        const rlimit as{limit, limit};
        if (setrlimit(RLIMIT_AS, &as) != 0) return 2;
        const int devnull = open("/dev/null", O_WRONLY);  // the more-threads-than-cores warning
        dup2(devnull, 2);
        std::string message;
        try {
            set_num_threads(256);
        } catch (const ValueError& e) {
            message = e.what();
        }
        if (message.find("256") == std::string::npos) return 3;
        if (message.find("Resource temporarily unavailable") == std::string::npos) return 4;
        if (get_num_threads() != 2 || chunks_run() != 2) return 5;
        if (!bits_equal(softmax(x, -1).data(), expected)) return 6;
        return 0;
    });
    INFO("child exit code " << code << " (1: no 2-thread pool; 2: setrlimit failed; 3, 4: no ValueError naming "
         "256 and the system's reason; 5: the old pool is gone; 6: softmax differs; -1: hung)");
    REQUIRE(code == 0);
#endif
}

// After fork() only the forking thread exists in the child: the pool's workers do not. A
// pooled softmax in the child returns the parent's bits on one thread, and set_num_threads
// builds a new pool there. (A child that waited for the parent's workers hung.)
TEST_CASE("a forked child runs pooled ops on one thread until set_num_threads", "[threads][parallel][regression]") {
    ThreadsGuard guard;
    set_num_threads(2);
    manual_seed(5);
    const Tensor x = randn({64, 512});
    const Array expected = softmax(x, -1).data();  // the pool's workers are now running
    REQUIRE(chunks_run() == 2);
    const int code = exit_code_of_child([&] {
        if (!bits_equal(softmax(x, -1).data(), expected)) return 1;
        if (get_num_threads() != 1 || chunks_run() != 1) return 2;
        set_num_threads(2);
        if (chunks_run() != 2 || !bits_equal(softmax(x, -1).data(), expected)) return 3;
        return 0;
    });
    INFO("child exit code " << code << " (1: softmax differs; 2: not on one thread; 3: a new pool fails; -1: hung)");
    REQUIRE(code == 0);
    REQUIRE(chunks_run() == 2);  // the parent's pool is untouched
    REQUIRE(bits_equal(softmax(x, -1).data(), expected));
}

// Asking for more threads than std::thread::hardware_concurrency() reports works, and prints one
// warning to stderr for the whole process, naming both numbers. In a child, whose stderr goes to
// a file: hw threads print nothing, hw + 1 and hw + 2 together print one line.
TEST_CASE("a pool larger than the hardware is warned about once per process", "[threads][parallel]") {
    const unsigned hw = std::thread::hardware_concurrency();
    if (hw == 0) {
        SUCCEED("skipped: the hardware's thread count is unknown here");
        return;
    }
    TempDir dir;
    const std::string err = dir.file("stderr");
    const int code = exit_code_of_child([&] {
        const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        set_num_threads(int(hw));
        set_num_threads(int(hw) + 1);
        if (get_num_threads() != int(hw) + 1) return 1;  // warned, not refused
        set_num_threads(1);
        set_num_threads(int(hw) + 2);
        return 0;
    });
    REQUIRE(code == 0);
    const std::string text = read_bytes(err);
    INFO("stderr: " << text);
    REQUIRE(std::count(text.begin(), text.end(), '\n') == 1);
    CHECK_THAT(text, Contains(fmt::format("{} threads", hw + 1)) && Contains(fmt::format("{} hardware threads", hw)) &&
                         Contains("hardware_concurrency"));
}

// ---- fork() while another thread holds a process-wide lock ----------------------------------------
namespace {

// A thread that runs hold(), which takes a lock and calls held_now(): the lock is held for 200 ms.
// The constructor returns once it is held. fork() in between copies a locked mutex whose owner the
// child does not have, unless a pthread_atfork handler takes the lock across the fork. The thread
// lives until the destructor, so that it is running, not finished and unjoined, at the fork
// (ThreadSanitizer reports the latter in the child as a leaked thread).
class HeldElsewhere {
public:
    explicit HeldElsewhere(std::function<void()> hold) {
        thread_ = std::thread([this, hold = std::move(hold)] {
            hold();
            while (!done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        while (!held_.load()) std::this_thread::yield();
    }
    ~HeldElsewhere() {
        done_.store(true);
        thread_.join();
    }
    // Called by hold() with the lock taken.
    void held_now() {
        held_.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }

private:
    std::atomic<bool> held_{false}, done_{false};
    std::thread thread_;
};

}  // namespace

TEST_CASE("fork while another thread holds a process-wide lock: the child does not hang",
          "[threads][parallel][regression]") {
    SECTION("the generator's (a draw in progress)") {
        manual_seed(6);
        HeldElsewhere other([&other] {
            std::lock_guard<std::mutex> lock(generator_mutex());
            other.held_now();
        });
        const int code = exit_code_of_child([] { return randn({3}).numel() == 3 ? 0 : 1; });
        INFO("child exit code " << code << " (-1: hung in randn)");
        REQUIRE(code == 0);
    }
    SECTION("a leaf's gradient lock (a gradient being written)") {
        Tensor x = ones({2}, true);
        HeldElsewhere other([&other, &x] {
            std::lock_guard<std::mutex> lock(leaf_lock(*x.impl()));
            other.held_now();
        });
        const int code = exit_code_of_child([&x] {
            (x * 3).sum().backward();
            return x.grad().data()(1) == 3 ? 0 : 1;
        });
        INFO("child exit code " << code << " (-1: hung in backward)");
        REQUIRE(code == 0);
    }
    SECTION("a node's lock (its backward running)") {
        // y = 3·x through an op whose backward takes 200 ms on the other thread, a retained graph
        Tensor x = ones({2}, true);
        HeldElsewhere* holder = nullptr;
        const auto slow_backward = [&holder](const Array& grad_out, const Array&) {
            holder->held_now();
            return make_grads(Array(grad_out * real(3)));
        };
        const Tensor y = make_result(x.data() * real(3), "slow_times_3", {x}, slow_backward);
        HeldElsewhere other([&holder, &other, &y] {
            holder = &other;
            y.sum().backward(Tensor(), /*retain_graph=*/true);
        });
        const int code = exit_code_of_child([&x, &y] {
            const Grads g = grad(y.sum(), {x});  // through the node the parent's other thread was running
            return g[0] && std::get<Array>(g[0]->value)(1) == 3 ? 0 : 1;
        });
        INFO("child exit code " << code << " (1: wrong gradient; -1: hung in backward)");
        REQUIRE(code == 0);
    }
    SECTION("the pool's owner (a parallel_for running)") {
        ThreadsGuard guard;
        set_num_threads(2);
        HeldElsewhere other([&other] {
            parallel_for(1000, 1, [&other](std::size_t begin, std::size_t) {
                if (begin == 0) other.held_now();
            });
        });
        const int code = exit_code_of_child([] { return chunks_run() == 1 ? 0 : 1; });
        INFO("child exit code " << code << " (-1: hung in parallel_for)");
        REQUIRE(code == 0);
    }
}

// ---- fork() during the process's first small product ----------------------------------------------
namespace {

// C (16, 16) = A (16, 16) · B (16, 16), all ones: every C is 16. Small and float, so a product
// xgrad runs on libxsmm when it is built with it (core/blas.cpp), whose first call initialises
// libxsmm for the process.
bool small_product_is_16() {
    std::vector<real> a(16 * 16, 1), b(16 * 16, 1), c(16 * 16, 0);
    gemm(false, false, 16, 16, 16, 1, a.data(), 16, b.data(), 16, 0, c.data(), 16);
    return std::all_of(c.begin(), c.end(), [](real v) { return v == 16; });
}

}  // namespace

// One trial, run by the test below in a fresh process (so that its product is the process's
// first): another thread starts the first small product as this one forks, and the child runs
// one of its own. Hidden ([.]): run alone, it is a trial, not a test of this process.
TEST_CASE("fork trial: a child forked during the first small product", "[.][fork_trial]") {
    std::atomic<bool> go{false};
    std::thread other([&go] {
        while (!go.load()) {
        }
        small_product_is_16();
    });
    go.store(true);
    const int code = exit_code_of_child([] { return small_product_is_16() ? 0 : 1; });
    other.join();
    INFO("child exit code " << code << " (1: wrong product; -1: hung in its first product)");
    REQUIRE(code == 0);
}

namespace {

// Runs the hidden test case `trial` of this program in a fresh copy of it (so that the trial's
// first backward, resize or product is the process's first), `times` times, each within 30 s.
void run_trial_in_fresh_processes(const char* trial, int times) {
    TempDir dir;
    const std::string out = dir.file("trial.txt");
#if defined(XGRAD_TEST_TSAN)
    // For the trials this program starts: ThreadSanitizer counts a trial's other thread, alive in
    // the parent at fork() and never joined in the child, as a leaked thread when the child exits
    // (exit code 66). The child cannot join a thread fork() did not copy; that is not a defect.
    const char* options = std::getenv("TSAN_OPTIONS");
    setenv("TSAN_OPTIONS", (std::string(options ? options : "") + ":report_thread_leaks=0").c_str(), 1);
#endif
    for (int run = 0; run < times; ++run) {
        const int code = exit_code_of_child(
            [&out, trial] {
                const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                dup2(fd, 1);
                execl("/proc/self/exe", "/proc/self/exe", trial, static_cast<char*>(nullptr));
                return 127;  // exec failed
            },
            std::chrono::seconds(30));
        INFO(trial << ", run " << run << ": exit code " << code
                   << " (1: the trial failed; 127: no exec; -1: hung); its report:\n" << read_bytes(out));
        REQUIRE(code == 0);
    }
}

}  // namespace

// The trial above, 30 times. A child forked while another thread was inside libxsmm's one-time
// initialisation inherited it half done, and spun forever in its own first product.
TEST_CASE("fork during the process's first small product: the child does not hang",
          "[threads][parallel][regression]") {
    run_trial_in_fresh_processes("fork trial: a child forked during the first small product", 30);
}

// ---- fork() while the pool's loops run backward -------------------------------------------------
// fork() takes the pool, then holds new backwards back and waits for the running ones. In the
// other order, a loop whose bodies start a backward would wait for the fork while the fork
// waited for the loop: the parent hung in fork().
TEST_CASE("fork trial: forks while parallel_for bodies run backward", "[.][fork_trial]") {
    set_num_threads(2);  // the pool before the first backward, as in most programs
    {
        Tensor a = randn({4, 4}, true);
        (a * a).sum().backward();
    }
    std::atomic<bool> stop{false};
    std::thread looper([&stop] {
        while (!stop.load())
            parallel_for(64, 1, [](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) {
                    Tensor a = randn({16, 16}, true);
                    (a * a).sum().backward();  // d/da Σ a² = 2a
                }
            });
    });
    for (int r = 0; r < 20; ++r) {
        const int code = exit_code_of_child([] {
            Tensor a = full({2}, real(3), true);
            (a * a).sum().backward();
            return a.grad().data()(0) == 6 ? 0 : 1;
        });
        INFO("fork " << r << ": child exit code " << code << " (1: wrong gradient; -1: hung)");
        CHECK(code == 0);
    }
    stop.store(true);
    looper.join();
}

TEST_CASE("fork while parallel_for bodies run backward: neither parent nor child hangs",
          "[threads][parallel][regression]") {
    run_trial_in_fresh_processes("fork trial: forks while parallel_for bodies run backward", 2);
}

// Two threads, each inside a node's backward, fork at about the same time. Each waits for the
// backwards that are not forking: waiting for all but itself, each waited for the other forever.
TEST_CASE("fork trial: two threads fork from inside backwards at once", "[.][fork_trial]") {
    std::atomic<int> arrived{0}, child_failures{0};
    const auto forking_backward = [&] {
        Tensor x = ones({4}, true);
        const Tensor y = make_result(x.data() * real(2), "forking_times_2", {x}, [&](const Array& g, const Array&) {
            ++arrived;  // meet the other thread (at most 2 ms), then fork
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
            while (arrived.load() % 2 != 0 && std::chrono::steady_clock::now() < until) {
            }
            if (exit_code_of_child([] { return 0; }) != 0) ++child_failures;
            return make_grads(Array(g * real(2)));
        });
        y.sum().backward();
        return x.grad().data()(0) == 2;
    };
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&] {
            for (int r = 0; r < 50; ++r)
                if (!forking_backward()) ++wrong;
        });
    for (std::thread& t : threads) t.join();
    CHECK(child_failures.load() == 0);
    CHECK(wrong.load() == 0);
}

TEST_CASE("two threads forking from inside backwards at once: no hang", "[threads][parallel][regression]") {
    run_trial_in_fresh_processes("fork trial: two threads fork from inside backwards at once", 2);
}

// ---- exit() while the pool has work ----------------------------------------------------------
// The pool is never destroyed at exit: exit() from a worker's chunk joined that worker to itself
// (std::system_error, abort), and a thread still looping as the program ended had the pool
// destroyed under it (a crash or a hang).
TEST_CASE("exit() from a worker's chunk exits with its status", "[threads][parallel][regression]") {
    const int code = exit_code_of_child([] {
        set_num_threads(2);
        const std::thread::id caller = std::this_thread::get_id();
        parallel_for(1000, 1, [caller](std::size_t, std::size_t) {
            if (std::this_thread::get_id() != caller) std::exit(7);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        });
        return 1;  // no chunk ran on the worker
    });
    INFO("child exit code " << code << " (134: aborted; 1: no chunk on the worker; -1: hung)");
    REQUIRE(code == 7);
}

TEST_CASE("the program ends while another thread runs pooled loops", "[threads][parallel][regression]") {
#if defined(XGRAD_TEST_ASAN) || defined(XGRAD_TEST_TSAN)
    constexpr int kRuns = 5;  // an instrumented process takes about a second to end
#else
    constexpr int kRuns = 40;
#endif
    for (int run = 0; run < kRuns; ++run) {
        const int code = exit_code_of_child([] {
            set_num_threads(2);
            std::thread([] {
                for (;;) chunks_run();
            }).detach();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            std::exit(0);  // as main returning: static destructors run
            return 1;
        });
        INFO("run " << run << ": child exit code " << code << " (139: crashed; -1: hung)");
        REQUIRE(code == 0);
    }
}
