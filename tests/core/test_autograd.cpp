// tests/core/test_autograd.cpp — the engine, core/autograd.cpp, with accumulate.cpp and graph.cpp (float32).
//
// Covers: grad() stays undefined until a backward reaches the leaf; += accumulation across
// backward() calls; diamonds (x*x, x+x, one value with three consumers) with each node's
// backward run exactly once; a 100,000-op chain (backward and destruction without stack
// overflow); retain_graph; NoGradGuard; no shared_ptr cycles (weak_ptr expiry); row-sparse
// gradients meeting dense ones; visit_graph. What the engine refuses is in test_autograd_checks.cpp,
// concurrent backward in test_autograd_threads.cpp.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <exception>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

// y = s·x, whose backward counts how often it runs.
Tensor counted_scale(const Tensor& x, real s, int& calls) {
    Array y = x.data() * s;
    return make_result(std::move(y), "counted_scale", {x}, [s, &calls](const Array& g, const Array&) {
        ++calls;
        return Grads{Array(g * s)};
    });
}

// Runs f on a fresh thread with a 256 KB stack and waits for it; rethrows what f threw.
// The deep-graph tests run there, so that any recursion over the graph's depth overflows
// whatever the process's stack limit is: 8 MB holds a naive recursive destruction of a
// 100,000-node chain, so the main thread could not tell.
template <class F>
void run_on_small_stack(F f) {
    struct Job {
        F* f;
        std::exception_ptr error;
    } job{&f, nullptr};
    auto trampoline = [](void* p) -> void* {
        Job* j = static_cast<Job*>(p);
        try {
            (*j->f)();
        } catch (...) {
            j->error = std::current_exception();
        }
        return nullptr;
    };
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    const int rc = pthread_create(&thread, &attr, trampoline, &job);
    pthread_attr_destroy(&attr);
    REQUIRE(rc == 0);
    pthread_join(thread, nullptr);
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace

TEST_CASE("grad() is undefined until a backward reaches the leaf", "[autograd]") {
    Tensor x({1, 2}, true);
    Tensor unused({3, 4}, true);
    Tensor constant({5, 6});
    REQUIRE_FALSE(x.grad().defined());
    REQUIRE_FALSE(x.has_grad());

    Tensor h = x * constant;  // non-leaf: gets no .grad of its own
    sum(h).backward();
    REQUIRE(x.grad().defined());
    require_values(x.grad(), {5, 6});
    REQUIRE_FALSE(unused.grad().defined());   // not in the graph
    REQUIRE_FALSE(constant.grad().defined()); // does not require grad
    REQUIRE_FALSE(h.grad().defined());        // intermediate
}

TEST_CASE("backward on a scalar leaf gives dL/dL = 1", "[autograd]") {
    Tensor x(2.0, true);
    x.backward();
    REQUIRE(x.grad().item() == 1.0f);
}

TEST_CASE("an explicit gradient seeds a non-scalar backward", "[autograd]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = x * x;  // dy/dx = 2x
    y.backward(Tensor({1, 10, 100}));
    require_values(x.grad(), {2, 40, 600});
}

TEST_CASE("gradients accumulate across backward() calls", "[autograd]") {
    Tensor x({1, 2, 3}, true);
    (x * x).sum().backward();  // 2x
    require_values(x.grad(), {2, 4, 6});
    (x * 3).sum().backward();  // + 3
    require_values(x.grad(), {5, 7, 9});
    x.reset_grad();
    (x * 3).sum().backward();
    require_values(x.grad(), {3, 3, 3});
}

TEST_CASE("x*x and x+x: both uses of the same tensor contribute", "[autograd][diamond]") {
    Tensor x(3.0, true);
    (x * x).backward();
    REQUIRE(x.grad().item() == 6.0f);

    Tensor y({1, -2}, true);
    (y + y).sum().backward();
    require_values(y.grad(), {2, 2});

    Tensor z({2, 4}, true);
    (z / z).sum().backward();  // d(z/z)/dz = 0
    require_values(z.grad(), {0, 0});
}

TEST_CASE("diamond: a = 2x - d = (a + 1)(3a) — the shared node runs once", "[autograd][diamond]") {
    // d = (2x + 1)·6x = 12x² + 6x, so dd/dx = 24x + 6.
    int calls = 0;
    Tensor x({1, 2}, true);
    Tensor a = counted_scale(x, 2, calls);
    Tensor b = a + 1;
    Tensor c = a * 3;
    Tensor d = b * c;
    d.sum().backward();
    REQUIRE(calls == 1);
    require_values(d, {18, 60});
    require_values(x.grad(), {30, 54});
}

TEST_CASE("a value used by three consumers: the gradients sum before its backward runs", "[autograd][diamond]") {
    // h = 3x;  y = Σ h² + Σ 2h + Σ h   so dy/dh = 2h + 3 and dy/dx = 3(6x + 3) = 18x + 9.
    int calls = 0;
    Tensor x({1, 2}, true);
    Tensor h = counted_scale(x, 3, calls);
    Tensor y = sum(h * h) + sum(h * 2) + sum(h);
    y.backward();
    REQUIRE(calls == 1);
    REQUIRE(y.item() == Approx(9 + 36 + 6 + 12 + 3 + 6));
    require_values(x.grad(), {27, 45});
}

TEST_CASE("a 100000-op chain: backward and destruction do not overflow the stack", "[autograd][deep]") {
    constexpr int depth = 100000;
    Tensor x({1, 2}, true);
    std::weak_ptr<Node> first_node, last_node;
    std::string last_name;
    bool first_alive_after_backward = false;
    run_on_small_stack([&] {
        Tensor y = x;
        for (int i = 0; i < depth; ++i) {
            y = (i % 2 == 0) ? y * 1.0 : y + 0.0;
            if (i == 0) first_node = y.grad_fn();
        }
        last_node = y.grad_fn();
        last_name = y.grad_fn()->name;
        y.sum().backward();
        first_alive_after_backward = !first_node.expired();
    });  // y goes at the end of the lambda: 100,000 nodes are freed on the small stack
    REQUIRE(last_name == "add_scalar");
    require_values(x.grad(), {1, 1});
    REQUIRE(first_alive_after_backward);
    REQUIRE(last_node.expired());
    REQUIRE(first_node.expired());
}

TEST_CASE("a 100000-op chain with retain_graph: a second backward doubles the gradient", "[autograd][deep]") {
    Tensor x(1.0, true);
    run_on_small_stack([&] {
        Tensor y = x;
        for (int i = 0; i < 100000; ++i) y = y + 0.0;
        y.backward(Tensor(), /*retain_graph=*/true);
        y.backward();
    });
    REQUIRE(x.grad().item() == 2.0f);
}

TEST_CASE("a second backward without retain_graph throws ValueError naming retain_graph", "[autograd][retain]") {
    Tensor x({1, 2}, true);
    Tensor y = (x * x).sum();
    y.backward();
    require_values(x.grad(), {2, 4});
    REQUIRE_THROWS_AS(y.backward(), ValueError);
    REQUIRE_THROWS_WITH(y.backward(), Contains("backward") && Contains("retain_graph"));
    require_values(x.grad(), {2, 4});  // the failed call added nothing
}

TEST_CASE("a backward through a freed subgraph throws - even from a new root", "[autograd][retain]") {
    Tensor x({1, 2}, true);
    Tensor h = x * x;
    h.sum().backward();
    Tensor z = (h * 2).sum();  // reuses h, whose node was freed
    REQUIRE_THROWS_WITH(z.backward(), Contains("retain_graph"));
}

TEST_CASE("retain_graph=true allows a second backward - which doubles the gradient", "[autograd][retain]") {
    int calls = 0;
    Tensor x({1, 2}, true);
    Tensor y = counted_scale(x, 5, calls).pow(2).sum();  // dy/dx = 2·25x = 50x
    y.backward(Tensor(), /*retain_graph=*/true);
    require_values(x.grad(), {50, 100});
    y.backward();
    require_values(x.grad(), {100, 200});
    REQUIRE(calls == 2);
    REQUIRE_THROWS_WITH(y.backward(), Contains("retain_graph"));
}

TEST_CASE("NoGradGuard records no graph - and restores grad mode", "[autograd][nograd]") {
    Tensor x({1, 2}, true);
    REQUIRE(grad_enabled());
    {
        NoGradGuard guard;
        REQUIRE_FALSE(grad_enabled());
        Tensor y = x * x + x;
        REQUIRE_FALSE(y.requires_grad());
        REQUIRE(y.grad_fn() == nullptr);
        require_values(y, {2, 6});
        {
            NoGradGuard nested;
            REQUIRE_FALSE(grad_enabled());
        }
        REQUIRE_FALSE(grad_enabled());  // the nested guard restored "off", not "on"
        REQUIRE_THROWS_AS(y.backward(), ValueError);
    }
    REQUIRE(grad_enabled());
    Tensor z = x * x;
    REQUIRE(z.requires_grad());
    REQUIRE(z.grad_fn() != nullptr);
    REQUIRE(z.grad_fn()->name == "mul");
}

TEST_CASE("ops on tensors that do not require grad record nothing", "[autograd]") {
    Tensor a({1, 2}), b({3, 4});
    Tensor c = matmul(a.reshape({1, 2}), b.reshape({2, 1}));
    REQUIRE_FALSE(c.requires_grad());
    REQUIRE(c.grad_fn() == nullptr);
    REQUIRE(c.item() == 11.0f);
}

TEST_CASE("the graph holds no cycles: dropping the handles frees nodes and inputs", "[autograd][memory]") {
    std::weak_ptr<Node> node;
    std::weak_ptr<TensorImpl> input, output, grad;
    {
        Tensor x({1, 2, 3}, true);
        Tensor w({0.5, 0.5, 0.5}, true);
        Tensor y = (x * w).tanh().sum();
        node = y.grad_fn();
        input = x.impl_ptr();
        output = y.impl_ptr();
        REQUIRE(node.lock()->name == "sum");
        REQUIRE_FALSE(node.expired());
        y.backward(Tensor(), /*retain_graph=*/true);  // keep the closures alive too
        grad = x.impl()->grad;
        REQUIRE_FALSE(grad.expired());
        x = Tensor();
        w = Tensor();
        REQUIRE_FALSE(input.expired());  // still held by the graph below y
    }
    REQUIRE(node.expired());
    REQUIRE(input.expired());
    REQUIRE(output.expired());
    REQUIRE(grad.expired());
}

TEST_CASE("index_select and concat graphs hold no cycles either", "[autograd][memory]") {
    std::weak_ptr<Node> node;
    std::weak_ptr<TensorImpl> table;
    {
        Tensor E({{1, 2}, {3, 4}, {5, 6}}, true);
        Tensor rows = index_select(E, 0, IndexTensor{2, 0, 2});
        Tensor y = concat({rows, rows * 2}, 1).sum();
        node = rows.grad_fn();
        table = E.impl_ptr();
        y.backward(Tensor(), /*retain_graph=*/true);
        require_values(E.grad(), {{3, 3}, {0, 0}, {6, 6}});
    }
    REQUIRE(node.expired());
    REQUIRE(table.expired());
}

TEST_CASE("a graph freed at thread exit - after the engine's own thread_locals - is freed safely", "[autograd][memory]") {
    // thread_local objects die in reverse order of construction. `holder` is built first, so
    // at thread exit it dies after any thread_local the engine set up later on this thread;
    // freeing its graph must not touch them. (A graph in a static Tensor, freed at process
    // exit, is the same case. AddressSanitizer reports a heap-use-after-free if it does.)
    std::weak_ptr<Node> node;
    std::weak_ptr<TensorImpl> input;
    std::thread([&] {
        thread_local Tensor holder;
        Tensor x({1, 2}, true);
        holder = (x * 2).sum();
        node = holder.grad_fn();
        input = x.impl_ptr();
        { Tensor tmp = (x * 3).sum(); }  // a graph freed now, while everything is alive
    }).join();
    REQUIRE(node.expired());
    REQUIRE(input.expired());
}

TEST_CASE("sparse + sparse stays row-sparse and coalesced: unique sorted rows, duplicates summed",
          "[autograd][sparse]") {
    using nn::functional::embedding;
    Tensor w = zeros({5, 2}, true);
    // one backward, two lookups of w: rows 3, 1 (weight 1) and 1, 0 (weight 2)
    add(embedding(w, IndexTensor{3, 1}, std::nullopt, true),
        mul(embedding(w, IndexTensor{1, 0}, std::nullopt, true), Tensor(2.0)))
        .sum()
        .backward();
    // a second backward before zero_grad: rows 4, 3, 3 (weight 1)
    embedding(w, IndexTensor{4, 3, 3}, std::nullopt, true).sum().backward();
    const SparseGrad* sg = w.sparse_grad();
    REQUIRE(sg != nullptr);
    REQUIRE(w.impl()->grad == nullptr);
    REQUIRE(sg->indices == std::vector<std::int64_t>{0, 1, 3, 4});
    //   row 0: 2;  row 1: 1 + 2 = 3;  row 3: 1 + 2 = 3;  row 4: 1
    REQUIRE(sg->values == Array{{2, 2}, {3, 3}, {3, 3}, {1, 1}});
}

TEST_CASE("a sparse table tied to a dense head: sparse then dense is dense (values by hand)", "[autograd][sparse]") {
    using nn::functional::embedding;
    // w (3, 2) = [[1, 2], [3, 4], [5, 6]]; h (2, 2) = w[{2, 0}] = [[5, 6], [1, 2]]
    Tensor w({{1, 2}, {3, 4}, {5, 6}}, true);
    // backward 1, the lookup alone: L1 = sum(h · wᵀ) with wᵀ a constant copy here, so
    // dL1/dh[p, :] = Σ_j w[j, :] = [9, 12], for rows 2 and 0: row-sparse
    Tensor wt = transpose(w.detach(), 0, 1);
    matmul(embedding(w, IndexTensor{2, 0}, std::nullopt, true), wt).sum().backward();
    REQUIRE(w.sparse_grad()->indices == std::vector<std::int64_t>{0, 2});
    // backward 2, the head alone: L2 = sum(h0 · wᵀ) with h0 the constant h, so
    // dL2/dw[j, :] = Σ_p h0[p, :] = [6, 8] for every row j: dense
    matmul(Tensor({{5, 6}, {1, 2}}), transpose(w, 0, 1)).sum().backward();
    REQUIRE(w.sparse_grad() == nullptr);
    require_values(w.grad(), {{15, 20}, {6, 8}, {15, 20}});

    // both in one graph, h · wᵀ through the tied table, in whichever order the engine runs them
    Tensor v({{1, 2}, {3, 4}, {5, 6}}, true);
    matmul(embedding(v, IndexTensor{2, 0}, std::nullopt, true), transpose(v, 0, 1)).sum().backward();
    REQUIRE(v.sparse_grad() == nullptr);
    require_values(v.grad(), {{15, 20}, {6, 8}, {15, 20}});
}

TEST_CASE("index_select of a computed tensor: its row-sparse gradient is densified", "[autograd][sparse]") {
    Tensor x({{1, 2}, {3, 4}, {5, 6}}, true);
    Tensor y = mul(x, Tensor(2.0));                       // non-leaf (3, 2)
    Tensor z = index_select(y, 0, IndexTensor{2, 0, 2});  // rows 2, 0, 2
    // L = sum(z) + sum(y): dL/dy = [[1, 1], [0, 0], [2, 2]] + 1 = [[2, 2], [1, 1], [3, 3]]
    add(z.sum(), y.sum()).backward();
    require_values(x.grad(), {{4, 4}, {2, 2}, {6, 6}});   // dL/dx = 2 · dL/dy
    Tensor x2({{1, 2}, {3, 4}, {5, 6}}, true);            // the row gradient alone
    index_select(mul(x2, Tensor(2.0)), 0, IndexTensor{2, 0, 2}).sum().backward();
    require_values(x2.grad(), {{2, 2}, {0, 0}, {4, 4}});
}

TEST_CASE("a custom op's row-sparse gradient that does not fit its input throws, naming the op",
          "[autograd][errors][sparse]") {
    Tensor x = zeros({3, 2}, true);
    auto returning = [&](std::vector<std::int64_t> ids, Array rows) {
        return make_result(Array(x.data()), "bad_rows", {x}, [ids, rows](const Array&, const Array&) {
            return make_grads(RowSparseGrad{ids, rows});
        });
    };
    REQUIRE_THROWS_WITH(returning({5}, Array{{1, 1}}).sum().backward(),
                        Contains("bad_rows") && Contains("row 5") && Contains("[0, 3)"));
    REQUIRE_THROWS_WITH(returning({-1}, Array{{1, 1}}).sum().backward(),
                        Contains("bad_rows") && Contains("row -1"));
    REQUIRE_THROWS_WITH(returning({1}, Array{{1, 1, 1}}).sum().backward(),
                        Contains("bad_rows") && Contains("(1, 3)") && Contains("(3, 2)"));
    REQUIRE_THROWS_AS(returning({1, 2}, Array{{1, 1}}).sum().backward(), ValueError);
    REQUIRE_FALSE(x.has_grad());
    returning({1, 1}, Array{{1, 2}, {3, 4}}).sum().backward();  // a fitting one is scatter-added
    require_values(x.grad(), {{0, 0}, {4, 6}, {0, 0}});
}

TEST_CASE("visit_graph visits every tensor the graph holds once", "[autograd][visit_graph]") {
    // loss = sum(x·w + x): x (2, 3) and w (3) are leaves; mul, add, sum make three tensors.
    // x feeds two ops but is visited once; so five tensors in all.
    Tensor x = randn({2, 3}, /*requires_grad=*/false);
    Tensor w = randn({3}, /*requires_grad=*/true);
    Tensor loss = sum(add(mul(x, w), x));
    std::map<std::string, int> seen;
    std::size_t bytes = 0;
    visit_graph(loss, [&](const TensorImpl& t) {
        ++seen[t.grad_fn ? t.grad_fn->name : (t.requires_grad ? "param" : "input")];
        bytes += t.data.size() * sizeof(real);
    });
    REQUIRE(seen == std::map<std::string, int>{{"add", 1}, {"input", 1}, {"mul", 1}, {"param", 1}, {"sum", 1}});
    REQUIRE(bytes == (6 + 3 + 6 + 6 + 1) * sizeof(real));  // x, w, x·w, x·w + x, the loss
    int leaves = 0;
    visit_graph(x, [&](const TensorImpl&) { ++leaves; });  // a leaf: itself only
    REQUIRE(leaves == 1);
}

// Every backward assumed grad_out has its output's shape. An output whose array was replaced by a
// smaller one (through the public Tensor::data()) before a consumer recorded it passed the input
// checks, and gelu's, narrow's and dropout's backward then read past grad_out (a heap overflow
// under ASan). The engine now checks the output's shape before running its node's backward.
