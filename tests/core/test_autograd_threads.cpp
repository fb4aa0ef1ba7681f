// tests/core/test_autograd_threads.cpp — backward from several threads at once (float32): each
// call keeps its own scratch state, and leaves' gradients are summed under a lock, so concurrent
// backward passes add up exactly as if they had run one after another (as in PyTorch). Tagged
// [threads]: `make tsan` runs them under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

namespace {

// Runs body(t) on `threads` threads at once and joins them.
template <class F>
void on_threads(int threads, F body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto& th : pool) th.join();
}

}  // namespace

TEST_CASE("four threads backwarding their own graphs into one shared leaf lose no gradient",
          "[autograd][threads][regression]") {
    // Each pass adds d(Σ w·c)/dw = c: (t + 1) on thread t, integers, so every sum is exact in float.
    // 2^18 values make each += long enough for unlocked passes to overlap (they lost updates).
    // ThreadSanitizer reports an unlocked += whether or not two of them overlap, and runs each
    // access many times slower: there 2^12 values suffice.
#if defined(XGRAD_TEST_TSAN)
    constexpr int kValues = 1 << 12;
#elif defined(XGRAD_TEST_ASAN)
    constexpr int kValues = 1 << 14;  // AddressSanitizer looks for bad accesses, not lost updates
#else
    constexpr int kValues = 1 << 18;
#endif
    constexpr int kThreads = 4, kReps = 50;
    Tensor w = zeros({kValues}, true);
    on_threads(kThreads, [&](int t) {
        for (int rep = 0; rep < kReps; ++rep) (w * real(t + 1)).sum().backward();
    });
    const real expected = kReps * (1 + 2 + 3 + 4);  // 500
    std::int64_t wrong = 0;
    for (real g : w.grad().data()) wrong += g != expected;
    REQUIRE(wrong == 0);
}

TEST_CASE("two threads backwarding one retained graph give the sum of both passes",
          "[autograd][threads][regression]") {
    // loss = Σ y, y = x + x + ... (101 terms, a chain of 100 adds): dloss/dx = 101 per pass, and
    // 2 threads · 50 passes add it 100 times. With marks kept in the shared graph, one pass
    // skipped the nodes the other had marked and half the gradient was lost.
    constexpr int kReps = 50;
#if defined(XGRAD_TEST_ASAN) || defined(XGRAD_TEST_TSAN)
    constexpr int kValues = 1 << 10;  // the marks are per node, whatever its size; the sanitizers are slow
#else
    constexpr int kValues = 1 << 14;
#endif
    Tensor x = ones({kValues}, true);
    Tensor y = x;
    for (int i = 0; i < 100; ++i) y = y + x;
    Tensor loss = y.sum();
    on_threads(2, [&](int) {
        for (int rep = 0; rep < kReps; ++rep) loss.backward(Tensor(), /*retain_graph=*/true);
    });
    std::int64_t wrong = 0;
    for (real g : x.grad().data()) wrong += g != real(101 * 2 * kReps);
    REQUIRE(wrong == 0);
}

TEST_CASE("a graph released by one thread makes the other's backward a clear error, never a crash",
          "[autograd][threads][regression]") {
    // Without retain_graph the first pass to run a node frees it; the other pass then meets the
    // freed node (in its sort, or waiting for the node's lock) and throws before adding anything.
    for (int attempt = 0; attempt < 20; ++attempt) {
        Tensor x({1, 2}, true);
        Tensor loss = (x * x).sum();
        std::vector<std::string> errors(2);
        on_threads(2, [&](int t) {
            try {
                loss.backward(Tensor(), /*retain_graph=*/false);
            } catch (const ValueError& e) {
                errors[std::size_t(t)] = e.what();
            }
        });
        REQUIRE(errors[0].empty() != errors[1].empty());  // exactly one pass ran
        REQUIRE((errors[0] + errors[1]).find("a second time") != std::string::npos);
        require_values(x.grad(), Tensor({2, 4}));
    }
}
