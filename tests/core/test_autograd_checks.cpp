// tests/core/test_autograd_checks.cpp — what the backward engine refuses (float32): outputs
// without a gradient, gradients of the wrong shape, parameters and leaves resized between forward
// and backward, arrays and gradients changed in place (version counters); every op's backward on
// inputs with no elements. Anomaly mode: test_anomaly.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

TEST_CASE("backward on a non-scalar without a gradient throws ValueError", "[autograd][errors]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = x * 2;
    REQUIRE_THROWS_AS(y.backward(), ValueError);
    REQUIRE_THROWS_WITH(y.backward(), Contains("backward") && Contains("(3)"));
    REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("backward with a gradient of the wrong shape throws ValueError with both shapes", "[autograd][errors]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor y = x * 2;
    REQUIRE_THROWS_AS(y.backward(ones({3, 2})), ValueError);
    REQUIRE_THROWS_WITH(y.backward(ones({6})), Contains("backward") && Contains("(6)") && Contains("(2, 3)"));
    REQUIRE_FALSE(x.grad().defined());
    y.backward(ones({2, 3}));  // the right shape still works: the failures freed nothing
    require_values(x.grad(), {{2, 2, 2}, {2, 2, 2}});
}

TEST_CASE("backward on a tensor that does not require grad throws", "[autograd][errors]") {
    Tensor x({1, 2});
    REQUIRE_THROWS_AS(x.sum().backward(), ValueError);
    REQUIRE_THROWS_WITH(x.sum().backward(), Contains("backward") && Contains("require"));
    REQUIRE_THROWS_WITH(Tensor().backward(), Contains("backward") && Contains("undefined"));
}

TEST_CASE("an op whose backward returns a gradient of the wrong shape is caught", "[autograd][errors]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = make_result(Array(x.data() * 2), "bad_op", {x},
                           [](const Array&, const Array&) { return Grads{Array(xt::ones<real>({2}))}; });
    REQUIRE_THROWS_WITH(y.sum().backward(), Contains("bad_op") && Contains("(2)") && Contains("(3)"));
}

TEST_CASE("setting a dense gradient of the wrong shape throws with both shapes", "[autograd][errors]") {
    Tensor x({1, 2, 3}, true);
    REQUIRE_THROWS_AS(set_leaf_grad(*x.impl(), Array(xt::ones<real>({4}))), ValueError);
    REQUIRE_THROWS_WITH(set_leaf_grad(*x.impl(), Array(xt::ones<real>({4}))),
                        Contains("set_grad") && Contains("(4)") && Contains("(3)"));
    REQUIRE_FALSE(x.has_grad());
}

// ---- the engine as the one writer of .grad: row-sparse gradients ---------------------------------

TEST_CASE("a parameter resized through mutable_data() is refused at its next forward, naming it - "
          "set_data() resizes it and drops the old gradient", "[autograd][regression]") {
    nn::Embedding emb(4, 2);
    emb.forward(IndexTensor{0, 3}).sum().backward();
    emb.zero_grad(/*set_to_none=*/false);                 // .grad stays (4, 2), all zeros
    emb.weight.mutable_data() = zeros({1000, 2}).data();  // the table now has 1000 rows
    auto step = [&] { emb.forward(IndexTensor{999}).sum().backward(); };
    REQUIRE_THROWS_AS(step(), ValueError);
    REQUIRE_THROWS_WITH(step(), Contains("forward") && Contains("parameter 'weight'") && Contains("(4, 2)") &&
                                    Contains("(1000, 2)") && Contains("set_data()"));
    require_values(emb.weight.grad(), {{0, 0}, {0, 0}, {0, 0}, {0, 0}});  // untouched
    // A plain op on the parameter is refused too, and so is a backward that would read it.
    REQUIRE_THROWS_WITH(emb.weight.sum(), Contains("sum") && Contains("parameter 'weight'"));
    emb.weight.set_data(zeros({4, 2}).data());
    Tensor loss = emb.forward(IndexTensor{1}).sum();
    emb.weight.mutable_data() = zeros({1000, 2}).data();
    REQUIRE_THROWS_WITH(loss.backward(), Contains("backward") && Contains("parameter 'weight'") &&
                                             Contains("(4, 2)") && Contains("(1000, 2)"));
    // A reference held from before the forward resizes without a version change: named as such.
    emb.weight.set_data(zeros({4, 2}).data());
    Array& held = emb.weight.mutable_data();
    Tensor loss2 = emb.forward(IndexTensor{1}).sum();
    held = zeros({6, 2}).data();
    REQUIRE_THROWS_WITH(loss2.backward(), Contains("same version") && Contains("parameter 'weight'") &&
                                              Contains("mutable_data()"));

    emb.weight.set_data(zeros({1000, 2}).data());  // the way to resize: the (4, 2) gradient goes
    REQUIRE_FALSE(emb.weight.has_grad());
    step();
    REQUIRE(emb.weight.grad().shape() == Shape{1000, 2});
    REQUIRE(emb.weight.grad().data()(999, 0) == 1);
    REQUIRE(xt::sum(emb.weight.grad().data())() == 2);  // row 999 only: (1, 1)
}

TEST_CASE("a row-sparse gradient left on a table shrunk to 10 rows meets a dense one: throws, "
          "nothing written", "[autograd][regression]") {
    Tensor w = zeros({1000, 2}, true);
    nn::functional::embedding(w, IndexTensor{999}, std::nullopt, /*sparse=*/true).sum().backward();
    REQUIRE(w.sparse_grad()->indices == std::vector<std::int64_t>{999});
    w.mutable_data() = zeros({10, 2}).data();
    // the same table as a tied output head: logits (1, 10) = h (1, 2) · wᵀ (wᵀ is a permute),
    // a dense gradient for w
    auto head = [&] { matmul(Tensor({{1, 2}}), transpose(w, 0, 1)).sum().backward(); };
    REQUIRE_THROWS_AS(head(), ValueError);
    REQUIRE_THROWS_WITH(head(), Contains("backward") && Contains("(1000, 2)") && Contains("(10, 2)") &&
                                    Contains("permute") && Contains("zero_grad()"));
    REQUIRE(w.sparse_grad()->indices == std::vector<std::int64_t>{999});  // untouched
    REQUIRE(w.sparse_grad()->values == Array{{1, 1}});
    REQUIRE(w.impl()->grad == nullptr);
}

TEST_CASE("hostile: an output array replaced before the backward is an xgrad error", "[hostile][regression]") {
    auto replaced_then_backward = [](auto op) {
        Tensor x = randn({4, 16}, true);
        Tensor y = op(x);
        y.mutable_data() = Array(ArrayShape{1}, real(1));  // one element where the op wrote 4 x 16 (or 4 x 8)
        return message_of<ValueError>([&] { y.sum().backward(); });
    };
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return F::gelu(x); }), Contains("'gelu'") && Contains("replaced"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return narrow(x, 1, 0, 8); }), Contains("'narrow'"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return F::dropout(x, 0.5); }), Contains("'dropout'"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return nn::apply_rotary(x, IndexTensor::arange(4)); }),
               Contains("'apply_rotary'"));
    // The root itself replaced: its gradient has the new shape, the op expects the old one.
    Tensor x = randn({4, 16}, true);
    Tensor y = F::layer_norm(x, {16});
    y.mutable_data() = Array(ArrayShape{1}, real(1));
    CHECK_THAT(message_of<ValueError>([&] { y.backward(); }), Contains("'layer_norm'"));
    // A write into an output (same shape) is an in-place change too, even where the op's
    // backward does not read its output (stricter than PyTorch, as for inputs).
    Tensor a = Tensor({1, 2}, true);
    Tensor b = a * real(3);
    b.mutable_data()(0) = b.data()(0);
    CHECK_THAT(message_of<ValueError>([&] { b.sum().backward(); }),
               Contains("output of op 'mul_scalar'") && Contains("modified in place"));
}

// ---- bug 5 ---------------------------------------------------------------------------------------
// Replacing the array of a tensor that an op read, between its forward and its backward, must be
// reported before any kernel runs: gemm would otherwise read and write out of bounds.
TEST_CASE("bug 5: an array replaced between forward and backward is a ValueError", "[reliability][bug5][regression]") {
    SECTION("Linear(64, 64): weight replaced by a (1, 1) array through data()") {
        nn::Linear lin(64, 64);
        Tensor loss = lin.forward(randn({8, 64})).sum();
        lin.weight.mutable_data() = Array(ArrayShape{1, 1});
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("linear"));
    }
    SECTION("Linear(2048, 2048)") {
        nn::Linear lin(2048, 2048);
        Tensor loss = lin.forward(randn({2, 2048})).sum();
        lin.weight.mutable_data() = Array(ArrayShape{1, 1});
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("linear"));
    }
    SECTION("mul: no xt::broadcast_error") {
        Tensor a = randn({3, 4}, true), b = randn({3, 4}, true);
        Tensor loss = (a * b).sum();
        b.mutable_data() = Array(ArrayShape{2, 5});
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("mul"));
    }
    SECTION("through a reference taken before the forward: the shape check still sees it") {
        nn::Linear lin(64, 64);
        Array& w = lin.weight.mutable_data();
        Tensor loss = lin.forward(randn({8, 64})).sum();
        w = Array(ArrayShape{1, 1});
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("linear") && Contains("(1, 1)"));
    }
    SECTION("an op's output replaced after an op consumed it") {
        Tensor x = randn({4}, true);
        Tensor y = exp(x);
        Tensor loss = y.sum();
        y.mutable_data() = Array(ArrayShape{1});
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("input 0 of op 'sum'"));
    }
}

// ---- version counters ------------------------------------------------------------------------------
// As PyTorch: "one of the variables needed for gradient computation has been modified by an
// inplace operation". The trial: y = Σ x ⊙ w, then w ← 10·w in place, gave dL/dx = [10, 10].
TEST_CASE("version counters: an input changed in place before backward is an error naming the op",
          "[reliability][version][regression]") {
    SECTION("through data()") {
        Tensor x = ones({2}, true), w = ones({2}, true);
        Tensor loss = (x * w).sum();
        w.mutable_data() *= 10;
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("mul") && Contains("modified by an inplace operation"));
        REQUIRE_FALSE(x.has_grad());  // nothing was accumulated
    }
    SECTION("through at()") {
        Tensor x = ones({2}, true), w = ones({2}, true);
        Tensor loss = (x * w).sum();
        w.mutable_data()(0) = 5;
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("mul"));
    }
    SECTION("because opt.step() ran between forward and backward") {
        nn::Linear lin(3, 2);
        optim::SGD opt(lin.named_parameters(), optim::SGDOptions(0.1));
        const Tensor x = randn({4, 3});
        lin.forward(x).sum().backward();            // a gradient, so that step() changes weights
        Tensor loss = lin.forward(x).sum();
        opt.step();
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("linear") && Contains("modified by an inplace operation"));
    }
    SECTION("the usual loop and reads through a const handle raise nothing") {
        nn::Linear lin(3, 2);
        optim::SGD opt(lin.named_parameters(), optim::SGDOptions(0.1));
        const Tensor x = randn({4, 3});
        for (int step = 0; step < 3; ++step) {
            Tensor loss = lin.forward(x).sum();
            const Tensor& w = lin.weight;
            REQUIRE(w.data().shape()[0] == 2);
            opt.zero_grad();
            REQUIRE_NOTHROW(loss.backward());
            opt.step();
        }
    }
    SECTION("stricter than PyTorch: every input is checked even where only its shape is needed") {
        Tensor a = ones({2}, true), b = ones({2}, true);
        Tensor loss = (a + b).sum();
        b.mutable_data() *= 3;
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("input 1 of op 'add'"));
    }
    SECTION("a read between forward and backward is free; a write through mutable_data() is a change") {
        Tensor x({1, -2}, true);
        Tensor y = relu(x);
        Tensor loss = y.sum();
        REQUIRE(y.data()(0) == 1);  // data() only reads: no version bump
        REQUIRE(y.at({1}) == 0);
        REQUIRE_NOTHROW(loss.backward());
        require_values(x.grad(), Tensor({1, 0}));
        Tensor y2 = relu(x), loss2 = y2.sum();
        y2.mutable_data()(1) = 0;   // the same value, but a write: sum's input changed
        REQUIRE_THAT(message_of<ValueError>([&] { loss2.backward(); }), Contains("op 'sum'"));
    }
}

// ---- in place changes the version counter must see ---------------------------------------------
TEST_CASE("an op's output changed in place before the backward is refused, naming the op",
          "[autograd][version][regression]") {
    // exp's backward reads its output: dx = y · dy. After y *= 10 it would give 10·e, not e.
    Tensor x({1, 1}, true);
    Tensor y = exp(x);
    y.mutable_data() *= 10;
    REQUIRE_THAT(message_of<ValueError>([&] { y.backward(ones({2})); }),
                 Contains("output of op 'exp'") && Contains("modified in place"));
    REQUIRE_FALSE(x.has_grad());
    Tensor y2 = exp(x);  // untouched: dx = e
    y2.backward(ones({2}));
    require_values(x.grad(), Tensor({std::exp(1.0f), std::exp(1.0f)}));
}

TEST_CASE("a gradient changed in place while a graph holds it is refused, as PyTorch's version counter",
          "[autograd][version][regression]") {
    // z = Σ g·w with g = x.grad() = 2x = (2, 4): dz/dw = g. Zeroing or adding to g in place
    // afterwards would change what the backward reads.
    Tensor x({1, 2}, true), w({3, 3}, true);
    auto record = [&] {
        x.reset_grad();
        (x * x).sum().backward();
        return (x.grad() * w).sum();
    };
    SECTION("nothing in between: dz/dw = g") {
        record().backward();
        require_values(w.grad(), Tensor({2, 4}));
    }
    SECTION("Optimizer::zero_grad(false) zeroes it in place") {
        Tensor z = record();
        optim::SGD opt({{"x", x}}, optim::SGDOptions(0.1));
        opt.zero_grad(false);
        REQUIRE_THAT(message_of<ValueError>([&] { z.backward(); }), Contains("op 'mul'") && Contains("inplace"));
    }
    SECTION("a second backward adds to it in place") {
        Tensor z = record();
        (x * x).sum().backward();
        REQUIRE_THAT(message_of<ValueError>([&] { z.backward(); }), Contains("op 'mul'") && Contains("inplace"));
    }
    SECTION("clip_grad_norm_ scales it in place") {
        Tensor z = record();
        optim::clip_grad_norm_({{"x", x}}, 1.0);
        REQUIRE_THAT(message_of<ValueError>([&] { z.backward(); }), Contains("op 'mul'"));
    }
}

TEST_CASE("a leaf resized through mutable_data() while it holds a gradient: an xgrad error with both shapes",
          "[autograd][regression]") {
    Tensor x = ones({4}, true);
    x.sum().backward();
    x.mutable_data() = zeros({8}).data();
    REQUIRE_THAT(message_of<ValueError>([&] { x.sum().backward(); }),
                 Contains("backward") && Contains("(4)") && Contains("(8)") && Contains("zero_grad()"));
    optim::SGD opt({{"x", x}}, optim::SGDOptions(0.1));
    REQUIRE_THAT(message_of<ValueError>([&] { opt.step(); }), Contains("SGD.step") && Contains("(4)") && Contains("(8)"));
    REQUIRE(x.grad().shape() == Shape{4});  // untouched
}

// ---- zero-size inputs ---------------------------------------------------------------------------
namespace {

struct EmptyCase {
    const char* op;
    std::vector<Shape> shapes;  // the leaves, zero-filled, requiring grad (at least one zero-size)
    Fn f;
    const char* refusal = nullptr;  // the ValueError's message, for an op that has no value to give
};

// Every differentiable op on inputs with no elements: forward, then backward from the sum of the
// output; each leaf's gradient has the leaf's shape, as PyTorch's (0 everywhere when y is empty).
std::vector<EmptyCase> empty_cases() {
    const IndexTensor no_ids(std::vector<std::int64_t>{});                   // (0,)
    const IndexTensor no_rows(std::vector<std::int64_t>{}, Shape{2, 0});     // (2, 0)
    const auto ids = [](const Shape& s) { return IndexTensor(std::vector<std::int64_t>{}, s); };
    const Tensor keep04 = ones({0, 4}), keep23 = ones({2, 3});
    const Tensor mask = ones({2, 0, 8});
    using V = const std::vector<Tensor>&;
    return {
        {"add", {{2, 0, 3}, {3}}, [](V x) { return x[0] + x[1]; }},
        {"sub", {{2, 0, 3}, {2, 0, 3}}, [](V x) { return x[0] - x[1]; }},
        {"mul", {{2, 0, 3}, {0, 1}}, [](V x) { return x[0] * x[1]; }},
        {"div", {{2, 0, 3}, {1, 3}}, [](V x) { return x[0] / x[1]; }},
        {"neg, scalars", {{2, 0}}, [](V x) { return 1 - (-x[0] * 2 + 3) / 4; }},
        {"rdiv", {{0}}, [](V x) { return 1 / x[0]; }},
        {"pow exp log", {{0, 3}}, [](V x) { return pow(exp(x[0]), 2) + log(x[0]); }},
        {"tanh relu sigmoid", {{3, 0}}, [](V x) { return tanh(x[0]) + relu(x[0]) + sigmoid(x[0]); }},
        {"sqrt rsqrt", {{0, 2}}, [](V x) { return sqrt(x[0]) + rsqrt(x[0]); }},
        {"sum", {{2, 0, 8}}, [](V x) { return x[0].sum(); }},
        {"sum(dim) over the empty dim", {{2, 0, 8}}, [](V x) { return x[0].sum(1); }},
        {"sum(dim) over a full dim", {{2, 0, 8}}, [](V x) { return x[0].sum(2, true); }},
        {"mean", {{2, 0, 8}}, [](V x) { return x[0].mean(); }, "mean of an empty tensor"},  // PyTorch: NaN
        {"mean(dim) over the empty dim", {{2, 0, 8}}, [](V x) { return x[0].mean(1); }, "mean over an empty dim"},
        {"mean(dim) over a full dim", {{2, 0, 8}}, [](V x) { return x[0].mean(-1); }},
        {"max(dim) over a full dim", {{0, 8}}, [](V x) { return x[0].max(1); }},
        {"var(dim)", {{0, 8}}, [](V x) { return var(x[0], 1); }},
        {"matmul (2, 0) (0, 3)", {{2, 0}, {0, 3}}, [](V x) { return matmul(x[0], x[1]); }},
        {"matmul (0, 4) (4, 3)", {{0, 4}, {4, 3}}, [](V x) { return matmul(x[0], x[1]); }},
        {"matmul batched", {{2, 0, 4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
        {"softmax", {{2, 0, 8}}, [](V x) { return softmax(x[0], -1) + softmax(x[0], 1); }},
        {"softmax_composed", {{2, 0, 8}}, [](V x) { return softmax_composed(x[0], -1) + softmax_composed(x[0], 1); }},
        {"log_softmax", {{2, 8, 0}}, [](V x) { return log_softmax(x[0], -1); }},
        {"index_select of no ids", {{4, 3}}, [no_ids](V x) { return index_select(x[0], 0, no_ids); }},
        {"index_select of an empty tensor", {{0, 3}}, [no_ids](V x) { return index_select(x[0], 0, no_ids); }},
        {"narrow", {{2, 0, 8}}, [](V x) { return x[0].narrow(2, 1, 3) + narrow(x[0], 1, 0, 0).sum(); }},
        {"split chunk", {{0, 4}}, [](V x) { return split(x[0], 2, 1)[1] + chunk(x[0], 2, 1)[0]; }},
        {"masked_fill", {{2, 0, 8}}, [mask](V x) { return masked_fill(x[0], mask, 1); }},
        {"tril triu", {{2, 0, 3}}, [](V x) { return tril(x[0]) + triu(x[0], 1); }},
        {"masked_matmul", {{0, 4}, {4, 0}}, [keep04](V x) { return masked_matmul(x[0], x[1], keep04); }},
        {"sampled_matmul", {{2, 0}, {0, 3}}, [keep23](V x) { return sampled_matmul(x[0], x[1], keep23); }},
        {"reshape", {{2, 0, 8}}, [](V x) { return x[0].reshape({2, 0, 2, 4}); }},
        {"reshape with -1", {{2, 0, 8}}, [](V x) { return x[0].view({-1, 8}); }},
        {"transpose permute", {{2, 0, 8}}, [](V x) { return x[0].transpose(0, 1) + permute(x[0], {1, 0, 2}); }},
        {"concat", {{2, 0, 8}, {2, 3, 8}}, [](V x) { return concat({x[0], x[1]}, 1); }},
        {"checkpoint", {{2, 0, 8}}, [](V x) { return checkpoint([](const Tensor& a) { return tanh(a) * 2; }, x[0]); }},
        {"gelu silu", {{2, 0}}, [](V x) { return F::gelu(x[0]) + F::gelu(x[0], "tanh") + F::silu(x[0]); }},
        {"dropout", {{2, 0}}, [](V x) { return F::dropout(x[0], 0.5, true); }},
        {"linear", {{0, 4}, {3, 4}, {3}}, [](V x) { return F::linear(x[0], x[1], x[2]); }},
        {"embedding of no ids", {{5, 4}}, [no_rows](V x) { return F::embedding(x[0], no_rows); }},
        {"embedding of no ids, sparse", {{5, 4}}, [no_rows](V x) { return F::embedding(x[0], no_rows, {}, true); }},
        {"layer_norm", {{0, 8}, {8}, {8}}, [](V x) { return F::layer_norm(x[0], {8}, x[1], x[2]); }},
        {"layer_norm_composed", {{2, 0, 8}}, [](V x) { return F::layer_norm_composed(x[0], {8}); }},
        {"rms_norm", {{0, 8}, {8}}, [](V x) { return F::rms_norm(x[0], {8}, x[1]); }},
        {"rms_norm_composed", {{2, 0, 8}}, [](V x) { return F::rms_norm_composed(x[0], {8}); }},
        {"cross_entropy", {{0, 5}}, [no_ids](V x) { return F::cross_entropy(x[0], no_ids); }},
        {"cross_entropy, sum", {{0, 5}}, [no_ids](V x) { return F::cross_entropy(x[0], no_ids, ce(nn::Reduction::Sum)); }},
        {"nll_loss", {{0, 5}}, [no_ids](V x) { return F::nll_loss(x[0], no_ids); }},
        {"mse_loss", {{2, 0}, {2, 0}}, [](V x) { return F::mse_loss(x[0], x[1]); }},
        {"binary_cross_entropy_with_logits", {{0, 3}}, [](V x) {
             return F::binary_cross_entropy_with_logits(x[0], zeros({0, 3}));
         }},
        {"apply_rotary", {{1, 2, 0, 4}}, [ids](V x) { return nn::apply_rotary(x[0], ids({0})); }},
        {"sdpa, B = 0", {{0, 2, 3, 4}, {0, 2, 3, 4}, {0, 2, 3, 4}}, [](V x) {
             return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true);
         }},
        {"sdpa, no queries", {{1, 2, 0, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, [](V x) {
             return F::scaled_dot_product_attention(x[0], x[1], x[2]);
         }},
        {"sdpa, causal, T = 0", {{1, 2, 0, 4}, {1, 2, 0, 4}, {1, 2, 0, 4}}, [](V x) {
             return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true);
         }},
        {"fused_causal_attention, B = 0", {{0, 2, 3, 4}, {0, 2, 3, 4}, {0, 2, 3, 4}}, [](V x) {
             return F::fused_causal_attention(x[0], x[1], x[2]);
         }},
        {"fused_causal_attention, T = 0", {{1, 2, 0, 4}, {1, 2, 0, 4}, {1, 2, 0, 4}}, [](V x) {
             return F::fused_causal_attention(x[0], x[1], x[2]);
         }},
        {"tiled_causal_attention, B = 0", {{0, 2, 3, 4}, {0, 2, 3, 4}, {0, 2, 3, 4}}, [](V x) {
             return F::tiled_causal_attention(x[0], x[1], x[2]);
         }},
        {"tiled_causal_attention, T = 0", {{1, 2, 0, 4}, {1, 2, 0, 4}, {1, 2, 0, 4}}, [](V x) {
             return F::tiled_causal_attention(x[0], x[1], x[2]);
         }},
    };
}

}  // namespace

TEST_CASE("every op's backward on a zero-size input gives a zero-size gradient, as PyTorch",
          "[autograd][empty][regression]") {
    for (const EmptyCase& c : empty_cases()) {
        INFO("op " << c.op);
        std::vector<Tensor> leaves;
        for (const Shape& s : c.shapes) leaves.push_back(zeros(s, true));
        Tensor y;
        if (c.refusal) {  // refused by the op, in its own words, as PyTorch refuses it
            CHECK_THAT(message_of<ValueError>([&] { c.f(leaves); }), Contains(c.refusal));
            continue;
        }
        CHECK_NOTHROW(y = c.f(leaves));
        if (!y.defined()) continue;
        REQUIRE(y.requires_grad());
        CHECK_NOTHROW(y.sum().backward());
        for (std::size_t i = 0; i < leaves.size(); ++i) {
            INFO("input " << i << " of shape " << shape_str(leaves[i].shape()));
            CHECK(leaves[i].has_grad());
            if (!leaves[i].has_grad()) continue;
            if (const SparseGrad* sparse = leaves[i].sparse_grad()) {  // an embedding's: no rows
                CHECK(sparse->dense_shape == leaves[i].shape());
                CHECK(sparse->indices.empty());
                continue;
            }
            CHECK(leaves[i].grad().shape() == leaves[i].shape());
            const Array& g = leaves[i].grad().data();  // an empty y: no input changes L (0)
            if (y.numel() == 0) CHECK(std::all_of(g.begin(), g.end(), [](real v) { return v == 0; }));
        }
    }
}
