// tests/test_parallel.cpp — xgrad's thread pool (core/parallel.hpp) and the ops that use it.
//
// Covers: parallel_for hands out every index of [0, n) exactly once, in contiguous chunks that
// depend only on n and the thread count, for 1, 2 and 3 threads and sizes below and above the
// grain; the pool resized back and forth; set_pool_threads(0) refused; and gelu (both forms),
// softmax and layer_norm giving bit-identical values and gradients at 1 and 2 threads (each
// value, and each column sum of layer_norm's dL/dw, is computed by one thread in a fixed order);
// a nested parallel_for running whole on its caller's thread; an exception in a chunk rethrown
// to the caller after all chunks ran; two application threads sharing the pool; gemm's bands,
// causal attention, Linear and AdamW's update bit-identical at 1 and 2 threads.
// Tagged [threads]: the ThreadSanitizer build runs these.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/blas.hpp"
#include "core/parallel.hpp"
#include "core/threads.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::message_of;
using Catch::Matchers::Contains;

namespace {

// Restores one thread when a test ends, however it ends.
struct ThreadsGuard {
    ~ThreadsGuard() { set_pool_threads(1); }
};

bool same_bits(const Array& a, const Array& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(real)) == 0;
}

}  // namespace

// OpenBLAS's own thread count (its C API; <cblas.h> itself clashes with xtensor-blas).
extern "C" int openblas_get_num_threads(void);

TEST_CASE("set_num_threads sizes xgrad's pool and puts OpenBLAS on 1 thread", "[threads][parallel]") {
    ThreadsGuard guard;
    REQUIRE(get_num_threads() == 1);  // a process that never called set_num_threads
    set_num_threads(2);
    REQUIRE(get_num_threads() == 2);
    REQUIRE(get_pool_threads() == 2);
    REQUIRE(openblas_get_num_threads() == 1);
    CHECK_THAT(message_of<ValueError>([] { set_num_threads(0); }),
               Contains("set_num_threads") && Contains(">= 1") && Contains("got 0"));
    REQUIRE(get_num_threads() == 2);  // a refused call changes nothing
    set_num_threads(1);
    REQUIRE(get_num_threads() == 1);
}

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

TEST_CASE("set_pool_threads refuses 0", "[threads][parallel]") {
    REQUIRE_THROWS_AS(set_pool_threads(0), ValueError);
    REQUIRE(get_pool_threads() == 1);
}

TEST_CASE("gelu softmax and layer_norm are bit-identical at 1 and 2 threads", "[threads][parallel]") {
    ThreadsGuard guard;
    namespace F = nn::functional;
    // Sizes above every op's grain, so 2 threads really split the work; D = 100 leaves a tail
    // of 4 values after 12 registers of 8.
    manual_seed(5);
    const Tensor x = randn({40, 64, 100}) * 3, w = randn({100}), b = randn({100});
    const Tensor G = randn({40, 64, 100});
    auto run = [&](int T) {
        set_pool_threads(T);
        std::vector<Array> out;
        for (int op = 0; op < 4; ++op) {
            Tensor xi = x.detach().requires_grad_(), wi = w.detach().requires_grad_(), bi = b.detach().requires_grad_();
            Tensor y = op == 0 ? F::gelu(xi, "none")
                     : op == 1 ? F::gelu(xi, "tanh")
                     : op == 2 ? softmax(xi, -1)
                               : F::layer_norm(xi, {100}, wi, bi);
            y.backward(G);
            out.push_back(y.data());
            out.push_back(xi.grad().data());
            if (op == 3) {
                out.push_back(wi.grad().data());
                out.push_back(bi.grad().data());
            }
        }
        return out;
    };
    const std::vector<Array> one = run(1), two = run(2), two_again = run(2);
    REQUIRE(one.size() == two.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
        INFO("array " << i << " (gelu none y, dx; gelu tanh y, dx; softmax y, dx; layer_norm y, dx, dw, db)");
        REQUIRE(same_bits(one[i], two[i]));
        REQUIRE(same_bits(two[i], two_again[i]));
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

TEST_CASE("gemm split into bands over 2 threads: the same bits run to run, the one-thread product to rounding", "[threads][parallel][regression]") {
    ThreadsGuard guard;
    // (M, N, K) above the split size (2^20 multiply-adds), cut by rows (M ≥ N) and by columns
    // (M < N), with every transpose flag, and beta = 1 accumulating into a non-zero C.
    // These are the same dot products over K either way; only the thread computing them differs.
    const std::size_t shapes[][3] = {{768, 384, 128}, {128, 512, 768}, {77, 1000, 33}};
    for (const auto& s : shapes) {
        const std::size_t M = s[0], N = s[1], K = s[2];
        manual_seed(9);
        const Array A = randn({M * K}).data(), B = randn({K * N}).data(), C0 = randn({M * N}).data();
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
                for (real beta : {real(0), real(1)}) {
                    auto product = [&](int T) {
                        set_pool_threads(T);
                        Array C = C0;
                        gemm(ta, tb, M, N, K, real(0.5), A.data(), ta ? M : K, B.data(), tb ? K : N, beta,
                             C.data(), N);
                        return C;
                    };
                    INFO("M " << M << " N " << N << " K " << K << " trans_a " << ta << " trans_b " << tb << " beta " << beta);
                    // A band may run a different OpenBLAS kernel than the whole product (it picks
                    // by size, and the pick depends on the CPU), so one and two threads agree to
                    // rounding; a fixed thread count gives the same bits every time.
                    const Array one = product(1), two = product(2), two_again = product(2);
                    REQUIRE(same_bits(two, two_again));
                    REQUIRE(double(xt::amax(xt::abs(one - two))()) <= 1e-5 * std::max(1.0, double(xt::amax(xt::abs(one))())));
                    // and it is the product: one element checked against a plain sum in double
                    double ref = beta * C0[N + 2];
                    for (std::size_t k = 0; k < K; ++k)
                        ref += 0.5 * double(ta ? A[k * M + 1] : A[1 * K + k]) * double(tb ? B[2 * K + k] : B[k * N + 2]);
                    REQUIRE(one[N + 2] == Approx(ref).margin(1e-4));
                }
    }
}

TEST_CASE("causal attention and Linear are bit-identical at 1 and 2 threads", "[threads][parallel]") {
    ThreadsGuard guard;
    namespace F = nn::functional;
    manual_seed(11);
    const Tensor q = randn({3, 4, 64, 32}), k = randn({3, 4, 64, 32}), v = randn({3, 4, 64, 32});
    const Tensor x = randn({3, 256, 128}), w = randn({384, 128}) * 0.1, b = randn({384});
    const Tensor Gq = randn({3, 4, 64, 32}), Gx = randn({3, 256, 384});
    auto run = [&](int T) {
        set_pool_threads(T);
        Tensor qi = q.detach().requires_grad_(), ki = k.detach().requires_grad_(), vi = v.detach().requires_grad_();
        Tensor o = F::fused_causal_attention(qi, ki, vi);  // the kernel CausalSelfAttention picks
        o.backward(Gq);
        Tensor xi = x.detach().requires_grad_(), wi = w.detach().requires_grad_(), bi = b.detach().requires_grad_();
        Tensor y = F::linear(xi, wi, bi);  // (768 × 128)·(128 × 384): split into bands at T = 2
        y.backward(Gx);
        return std::vector<Array>{o.data(), qi.grad().data(), ki.grad().data(), vi.grad().data(),
                                  y.data(), xi.grad().data(), wi.grad().data(), bi.grad().data()};
    };
    const std::vector<Array> one = run(1), two = run(2);
    for (std::size_t i = 0; i < one.size(); ++i) {
        INFO("array " << i << " (attention out, dq, dk, dv; linear y, dx, dw, db)");
        REQUIRE(same_bits(one[i], two[i]));
    }
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

TEST_CASE("AdamW's dense update is bit-identical at 1 and 2 threads", "[threads][parallel]") {
    ThreadsGuard guard;
    // 100,003 elements: above the update's grain (32,768), and not a multiple of its 64-element
    // blocks, so the last block is partial.
    manual_seed(21);
    const Tensor w0 = randn({100003});
    auto run = [&](int T) {
        set_pool_threads(T);
        Tensor w = w0.detach().requires_grad_();
        optim::AdamW opt(NamedTensors{{"w", w}}, optim::AdamWOptions(1e-2));
        for (int step = 0; step < 3; ++step) {
            opt.zero_grad();
            Tensor loss = (w * w * w).sum();
            loss.backward();
            opt.step();
        }
        return w.data();
    };
    const Array one = run(1), two = run(2);
    REQUIRE(same_bits(one, two));
    REQUIRE_FALSE(same_bits(one, w0.data()));  // the steps did change w
}
