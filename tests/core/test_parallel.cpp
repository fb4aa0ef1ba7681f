// tests/core/test_parallel.cpp — the thread pool of core/parallel.hpp: parallel_for visits every
// index once in contiguous chunks that depend only on n and the thread count, nests, passes an
// exception to its caller, and serves two application threads at once; a resize the system
// refuses keeps the old pool, and a pool larger than the hardware is reported once. What fork()
// does to the pool is test_fork.cpp. Tag [threads]: `make tsan` runs these under ThreadSanitizer.
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
#include "core/child_process.hpp"
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
// the child hung.) The refused pool of 256 threads is never run, so the more-threads-than-cores
// warning is not printed for it. Not under the sanitizers: their shadow memory counts against
// RLIMIT_AS too.
TEST_CASE("a resize the system refuses throws and keeps the old pool", "[threads][parallel][regression]") {
#if defined(XGRAD_TEST_ASAN) || defined(XGRAD_TEST_TSAN)
    SUCCEED("skipped: a sanitizer's shadow memory would hit the address-space limit first");
#else
    manual_seed(4);
    const Tensor x = randn({64, 512});
    const Array expected = softmax(x, -1).data();
    TempDir dir;
    const std::string err = dir.file("stderr");
    const int code = exit_code_of_child([&] {
        set_num_threads(2);
        if (chunks_run() != 2) return 1;
        const rlim_t limit = address_space_bytes() + (rlim_t(64) << 20);
        const rlimit as{limit, limit};
        if (setrlimit(RLIMIT_AS, &as) != 0) return 2;
        const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
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
    CHECK(read_bytes(err).empty());  // no warning about a pool that never ran
#endif
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

