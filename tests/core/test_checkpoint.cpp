// tests/core/test_checkpoint.cpp — xgrad::checkpoint (core/checkpoint.cpp) and the engine entries it
// uses: grad() (gradients returned, no .grad written), InputRecorder, EnableGradGuard.
//
// Covers: gradients with checkpoint equal to those without, bit for bit, on a small MLP and on a
// transformer-like block with dropout; the generator after backward as without checkpoint; nested
// checkpoints (the inner fn runs 3 times); several inputs, inputs without grad, a result without
// grad; an optimizer step between forward and backward refused; a parameter first read through a
// transpose or reshape; the graph kept (inputs + parameters + output); the errors.
#include <catch2/catch.hpp>

#include <random>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/checkpoint.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

std::mt19937_64 generator_now() {
    std::lock_guard<std::mutex> lock(generator_mutex());
    return generator();
}

// Every parameter's gradient of `m`, in order (copies).
std::vector<Tensor> grads_of(const nn::Module& m) {
    std::vector<Tensor> out;
    for (const Tensor& p : m.parameters()) out.push_back(p.grad().detach());
    return out;
}

void require_bits_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("tensor " << i);
        REQUIRE(bits_equal(a[i], b[i]));
    }
}

// x (N, 4) → Linear 4→8 → tanh → Linear 8→3: (N, 3).
struct MLP : nn::Module {
    MLP() {
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
    }
    Tensor forward(const Tensor& x) const { return fc2->forward(fc1->forward(x).tanh()); }
    std::shared_ptr<nn::Linear> fc1, fc2;
};

// A pre-LayerNorm transformer block with dropout in attention and after the MLP: (B, T, d) → (B, T, d).
struct Block : nn::Module {
    explicit Block(std::int64_t d) {
        ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(d));
        attn = register_module("attn", std::make_shared<nn::CausalSelfAttention>(
                                           d, 2, nn::CausalSelfAttentionOptions().dropout(0.2)));
        ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(d));
        fc = register_module("fc", std::make_shared<nn::Linear>(d, 4 * d));
        proj = register_module("proj", std::make_shared<nn::Linear>(4 * d, d));
    }
    Tensor forward(Tensor x) const {
        x = x + attn->forward(ln_1->forward(x));
        return x + F::dropout(proj->forward(F::gelu(fc->forward(ln_2->forward(x)))), 0.2, is_training());
    }
    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<nn::CausalSelfAttention> attn;
    std::shared_ptr<nn::Linear> fc, proj;
};

}  // namespace

TEST_CASE("checkpoint: an MLP's output and gradients equal the plain ones bit for bit", "[checkpoint]") {
    manual_seed(1);
    MLP mlp;
    Tensor x = randn({5, 4}, true);
    const Tensor w = randn({5, 3});  // L = Σ y ⊙ w, so dL/dy = w

    Tensor plain = mlp.forward(x);
    (plain * w).sum().backward();
    const std::vector<Tensor> want = grads_of(mlp);
    const Tensor want_x = x.grad().detach();

    mlp.zero_grad();
    x.reset_grad();
    Tensor y = checkpoint([&](const Tensor& in) { return mlp.forward(in); }, x);
    REQUIRE(bits_equal(y, plain));
    REQUIRE(y.grad_fn()->name == "checkpoint");
    (y * w).sum().backward();
    require_bits_equal(grads_of(mlp), want);
    REQUIRE(bits_equal(x.grad(), want_x));
}

TEST_CASE("checkpoint: the graph keeps the inputs, the parameters and the output only", "[checkpoint]") {
    manual_seed(2);
    MLP mlp;
    Tensor x = randn({5, 4}, true);
    Tensor h = x * 2;  // a non-leaf input
    int plain_tensors = 0, kept = 0;
    visit_graph(mlp.forward(h), [&](const TensorImpl&) { ++plain_tensors; });
    Tensor y = checkpoint([&](const Tensor& in) { return mlp.forward(in); }, h);
    visit_graph(y, [&](const TensorImpl&) { ++kept; });
    REQUIRE(kept == 1 + 2 + 4);  // y; h and x below it; fc1's and fc2's weight and bias
    REQUIRE(plain_tensors > kept);
}

TEST_CASE("checkpoint: a block with dropout gives the plain gradients and leaves the generator as without it",
          "[checkpoint]") {
    manual_seed(3);
    Block block(8);
    Tensor x0 = randn({2, 5, 8}, true);
    const Tensor w = randn({2, 5, 8});
    auto run = [&](bool use_checkpoint) {
        block.zero_grad();
        x0.reset_grad();
        manual_seed(11);
        Tensor x = x0 * 1.5;  // a non-leaf block input, as in a model
        Tensor y = use_checkpoint ? checkpoint([&](const Tensor& in) { return block.forward(in); }, x)
                                  : block.forward(x);
        (y * w).sum().backward();
        std::vector<Tensor> out = grads_of(block);
        out.push_back(x0.grad().detach());
        out.push_back(y.detach());
        return std::make_pair(out, generator_now());
    };
    const auto [plain, rng_plain] = run(false);
    const auto [ckpt, rng_ckpt] = run(true);
    require_bits_equal(ckpt, plain);
    REQUIRE(rng_ckpt == rng_plain);
    // the masks were drawn: a run from another seed differs
    manual_seed(12);
    Tensor other = block.forward(x0 * 1.5);
    REQUIRE_FALSE(bits_equal(other, plain.back()));
}

TEST_CASE("checkpoint: nested, the inner function runs three times and the gradients are the plain ones",
          "[checkpoint]") {
    manual_seed(4);
    Tensor a = randn({3, 3}, true), b = randn({3, 3}, true);
    int inner_calls = 0;
    auto inner = [&](const Tensor& u) {
        ++inner_calls;
        return matmul(u, b).tanh();
    };
    auto outer = [&](const Tensor& u) { return checkpoint(inner, u * u) + u; };
    Tensor plain = matmul(a * a, b).tanh() + a;
    plain.sum().backward();
    const Tensor ga = a.grad().detach(), gb = b.grad().detach();
    a.reset_grad();
    b.reset_grad();
    Tensor y = checkpoint(outer, a);
    REQUIRE(inner_calls == 1);
    y.sum().backward();
    REQUIRE(inner_calls == 3);  // outer forward, outer recomputation, inner backward
    REQUIRE(bits_equal(a.grad(), ga));
    REQUIRE(bits_equal(b.grad(), gb));
}

TEST_CASE("checkpoint: several inputs, one without grad, and hand-computed gradients", "[checkpoint]") {
    Tensor a({1.0, 2.0}, true), b({3.0, -1.0}, true);
    const Tensor c({0.5, 4.0});  // no grad
    // y = a·b + c·a²: dL/da = b + 2ca, dL/db = a (L = Σ y)
    Tensor y = checkpoint([](const Tensor& p, const Tensor& q, const Tensor& r) { return p * q + r * p * p; }, a, b, c);
    require_values(y, Tensor({3.5, 14.0}));
    y.sum().backward();
    require_values(a.grad(), Tensor({3.0 + 1.0, -1.0 + 16.0}));
    require_values(b.grad(), Tensor({1.0, 2.0}));
    REQUIRE_FALSE(c.has_grad());
}

TEST_CASE("checkpoint: no input requires grad, a parameter first read through a transpose or reshape",
          "[checkpoint]") {
    Tensor W({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, true);  // (3, 2)
    Tensor bias({1.0, -1.0, 2.0}, true);                    // (3,)
    const Tensor x({{1.0, 1.0}, {2.0, 0.0}});               // (2, 2), no grad
    // y = x Wᵀ + bias as (1, 3): dL/dW = Σ_rows x (each of W's rows), dL/dbias = 2 (two rows), L = Σ y
    Tensor y = checkpoint([&](const Tensor& in) { return matmul(in, W.transpose(0, 1)) + bias.reshape({1, 3}); }, x);
    REQUIRE(y.requires_grad());
    REQUIRE(y.grad_fn()->inputs.size() == 3);  // x, W, bias
    y.sum().backward();
    require_values(W.grad(), Tensor({{3.0, 1.0}, {3.0, 1.0}, {3.0, 1.0}}));
    require_values(bias.grad(), Tensor({2.0, 2.0, 2.0}));
}

TEST_CASE("checkpoint: fn returning a parameter itself passes its gradient on", "[checkpoint]") {
    Tensor p({1.0, 2.0}, true);
    const Tensor x({3.0, 4.0});
    Tensor y = checkpoint([&](const Tensor&) { return p; }, x);
    (y * x).sum().backward();  // dL/dp = x
    require_values(p.grad(), Tensor({3.0, 4.0}));
}

TEST_CASE("checkpoint: a result that does not require grad, and a plain call under no grad", "[checkpoint]") {
    const Tensor x({1.0, 2.0});
    Tensor y = checkpoint([](const Tensor& in) { return in * 2; }, x);
    REQUIRE_FALSE(y.requires_grad());
    require_values(y, Tensor({2.0, 4.0}));

    Tensor p({1.0, 2.0}, true);
    int calls = 0;
    NoGradGuard no_grad;
    Tensor z = checkpoint([&](const Tensor& in) { ++calls; return in * p; }, x);
    REQUIRE_FALSE(z.requires_grad());
    REQUIRE(calls == 1);
}

TEST_CASE("checkpoint: an output that depends on nothing requiring grad does not require grad", "[checkpoint]") {
    // as the plain call: fn detaches its input, or returns a constant
    const Tensor x({1.0, 2.0}, true);
    const Tensor detached = checkpoint([](const Tensor& in) { return in.detach() * 2; }, x);
    REQUIRE_FALSE(detached.requires_grad());
    require_values(detached, Tensor({2.0, 4.0}));
    const Tensor constant = checkpoint([](const Tensor&) { return ones({2}); }, x);
    REQUIRE_FALSE(constant.requires_grad());
    REQUIRE_THROWS_WITH(sum(constant).backward(), Contains("does not require grad"));
}

TEST_CASE("checkpoint: an optimizer step between forward and backward is refused", "[checkpoint]") {
    manual_seed(5);
    MLP mlp;
    optim::SGD opt(mlp.named_parameters(), optim::SGDOptions(0.1));
    const Tensor x = randn({5, 4});
    mlp.forward(x).sum().backward();  // gradients for the step
    Tensor y = checkpoint([&](const Tensor& in) { return mlp.forward(in); }, x).sum();
    opt.step();
    const std::string msg = message_of<ValueError>([&] { y.backward(); });
    REQUIRE_THAT(msg, Contains("op 'checkpoint'") && Contains("modified by an inplace operation") &&
                          Contains("parameter 'fc1.weight'"));
}

// fn that changes its input in place: the plain call's gradient of y = x² after x += 1 is 2(x + 1) = 4 6 8;
// a recomputation from the changed x would add 1 again and give 6 8 10. Refused at the forward,
// naming the input, and the input's values are fn's (the change is not undone).
TEST_CASE("checkpoint: fn that changes an input in place is refused, naming the input",
          "[checkpoint][regression]") {
    Tensor x({1.0, 2.0, 3.0}, true);
    const Tensor plain_x = x.detach();
    const auto bump_second = [](const Tensor& a, const Tensor& b) {
        Tensor changed = b;
        changed.mutable_data() += 1;
        return a * changed * changed;
    };
    const Tensor other = ones({3}, true);  // y requires grad: backward would recompute fn
    REQUIRE_THAT(message_of<ValueError>([&] { checkpoint(bump_second, other, plain_x); }),
                 Contains("checkpoint") && Contains("input 1 of 2") && Contains("in place"));
    require_values(plain_x, Tensor({2.0, 3.0, 4.0}));
    // an input that requires grad: refused too, not a wrong gradient after backward
    const auto bump = [](const Tensor& in) {
        Tensor changed = in;  // a second handle to in's storage
        changed.mutable_data() += 1;
        return in * in;
    };
    REQUIRE_THAT(message_of<ValueError>([&] { checkpoint(bump, x); }), Contains("input 0 of 1"));
    REQUIRE_FALSE(x.has_grad());
}

TEST_CASE("checkpoint: errors name checkpoint", "[checkpoint]") {
    const Tensor x({1.0}, true);
    REQUIRE_THAT(message_of<ValueError>([&] { checkpoint([](const Tensor& p, const Tensor&) { return p; }, x, Tensor()); }),
                 Contains("checkpoint") && Contains("input 1 of 2 is an undefined tensor"));
    REQUIRE_THAT(message_of<ValueError>([&] { checkpoint([](const Tensor&) { return Tensor(); }, x); }),
                 Contains("checkpoint") && Contains("returned an undefined tensor"));
}

TEST_CASE("grad: returns dL/dinputs without writing .grad, and stops at a non-leaf input", "[checkpoint][autograd]") {
    Tensor x({1.0, -2.0}, true);
    Tensor h = x * 3;       // non-leaf
    Tensor y = (h * h).sum();  // dL/dh = 2h = 6x, dL/dx = 18x
    const Grads g = grad(y, {h, x});
    REQUIRE(g.size() == 2);
    require_values(from_array(std::get<Array>(g[0]->value)), Tensor({6.0, -12.0}));
    REQUIRE_FALSE(g[1]);  // the pass stopped at h: nothing reached x past it
    REQUIRE_FALSE(x.has_grad());
    h.sum().backward();  // h's own node was neither run nor freed by grad()
    require_values(x.grad(), Tensor({3.0, 3.0}));
    const Grads gx = grad((x * 3 * (x * 3)).sum(), {x});
    require_values(from_array(std::get<Array>(gx[0]->value)), Tensor({18.0, -36.0}));
    require_values(x.grad(), Tensor({3.0, 3.0}));  // unchanged
    REQUIRE_THAT(message_of<ValueError>([&] { grad(Tensor({1.0}), {x}); }), Contains("grad") && Contains("does not require grad"));
}

TEST_CASE("EnableGradGuard records inside a NoGradGuard", "[checkpoint][autograd]") {
    Tensor x({1.0}, true);
    NoGradGuard no_grad;
    REQUIRE_FALSE((x * 2).requires_grad());
    {
        EnableGradGuard grad_on;
        REQUIRE((x * 2).requires_grad());
    }
    REQUIRE_FALSE(grad_enabled());
}
