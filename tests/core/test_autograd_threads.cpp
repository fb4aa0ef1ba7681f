// tests/core/test_autograd_threads.cpp — backward from several threads at once (float32): each
// call keeps its own scratch state, and leaves' gradients are summed under a lock, so concurrent
// backward passes add up exactly as if they had run one after another (as in PyTorch). Tagged
// [threads]: `make tsan` runs them under ThreadSanitizer.
#include <catch2/catch.hpp>

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
    constexpr int kThreads = 4, kReps = 50;
    Tensor w = zeros({4096}, true);
    on_threads(kThreads, [&](int t) {
        for (int rep = 0; rep < kReps; ++rep) (w * real(t + 1)).sum().backward();
    });
    const real expected = kReps * (1 + 2 + 3 + 4);  // 500
    for (real g : w.grad().data()) REQUIRE(g == expected);
}

TEST_CASE("two threads backwarding one retained graph give the sum of both passes",
          "[autograd][threads][regression]") {
    // loss = Σ (x·x)·x = Σ x³ through a diamond (x feeds both products): dloss/dx = 3x², and
    // each of the 2 · kReps passes adds it.
    constexpr int kReps = 100;
    Tensor x({1, 2, -1}, true);
    Tensor loss = (x * x * x).sum();
    on_threads(2, [&](int) {
        for (int rep = 0; rep < kReps; ++rep) loss.backward(Tensor(), /*retain_graph=*/true);
    });
    require_values(x.grad(), Tensor({600, 2400, 600}));
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
