// tests/core/test_parallel.cpp — the thread pool of core/parallel.hpp: parallel_for visits every
// index once in contiguous chunks that depend only on n and the thread count, nests, passes an
// exception to its caller, and serves two application threads at once. Tag [threads]: `make
// tsan` runs these under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <xgrad/core/blas.hpp>
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
