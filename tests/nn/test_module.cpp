// tests/nn/test_module.cpp — nn::Module (float32): registration and dotted names, counting,
// train()/eval(), zero_grad, bad names, cycles, a 100,000-deep tree, shared parameters; buffers
// (in state_dict and checkpoints, never a parameter, never stepped); state_dict / load_state_dict;
// and a small model trained end to end; every module's constructor under extreme sizes.
//
// Legend: B batch, T time, V vocabulary, d width, C classes, N rows.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;
namespace fs = std::filesystem;

namespace {

// A Linear plus a fixed (4,) buffer "scale" that multiplies its output, and a child with a
// buffer of its own: params fc.weight, fc.bias; buffers scale, child.offset.
struct Scaled : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::Module> child = std::make_shared<nn::Module>();
    Tensor scale, offset;
    Scaled() {
        fc = register_module("fc", std::make_shared<nn::Linear>(3, 4));
        scale = register_buffer("scale", Tensor({1, 2, 3, 4}));
        offset = child->register_buffer("offset", Tensor({{0.5, -0.5}}));
        register_module("child", child);
    }
    Tensor forward(const Tensor& x) const { return mul(fc->forward(x), scale); }
};

}  // namespace

// =============================================================================================
// Module
// =============================================================================================

TEST_CASE("named_parameters: dotted names in registration order", "[nn][module]") {
    TinyNet net;
    const NamedTensors named = net.named_parameters();
    REQUIRE(named.size() == 3);
    REQUIRE(named[0].first == "emb.weight");
    REQUIRE(named[1].first == "fc.weight");
    REQUIRE(named[2].first == "fc.bias");
    // The handles are the modules' own tensors, not copies.
    REQUIRE(named[0].second.impl() == net.emb->weight.impl());
    REQUIRE(named[2].second.impl() == net.fc->bias.impl());
    REQUIRE(net.parameters().size() == 3);
    for (const auto& p : net.parameters()) REQUIRE(p.requires_grad());
    REQUIRE(net.num_parameters() == 5 * 3 + 2 * 3 + 2);

    // Two levels deep, with a parameter registered directly on the outer module.
    struct Outer : nn::Module {
        Outer() {
            register_parameter("scale", ones({1}));
            register_module("encoder", std::make_shared<TinyNet>());
            register_parameter("shift", zeros({4}), /*requires_grad=*/false);
        }
    } outer;
    std::vector<std::string> names;
    for (const auto& [n, _] : outer.named_parameters()) names.push_back(n);
    // Own parameters first, then the children's, each in registration order.
    REQUIRE(names == std::vector<std::string>{"scale", "shift", "encoder.emb.weight", "encoder.fc.weight",
                                              "encoder.fc.bias"});
    REQUIRE(outer.num_parameters() == 1 + 4 + 23);
    REQUIRE_FALSE(outer.named_parameters()[1].second.requires_grad());
    REQUIRE(outer.named_children().size() == 1);
    REQUIRE(outer.named_children()[0].first == "encoder");
}

TEST_CASE("a submodule that was never registered is caught by counting parameters", "[nn][module]") {
    // The pattern: compute the expected count by hand and compare with num_parameters().
    // fc1: 4·8 + 8 = 40; fc2: 8·2 + 2 = 18; total 58.
    struct Careful : nn::Module {
        std::shared_ptr<nn::Linear> fc1, fc2;
        Careful() {
            fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
            fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
        }
    };
    struct Forgetful : nn::Module {
        std::shared_ptr<nn::Linear> fc1, fc2;
        Forgetful() {
            fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
            fc2 = std::make_shared<nn::Linear>(8, 2);  // the bug: stored, never registered
        }
    };
    const std::size_t expected = (4 * 8 + 8) + (8 * 2 + 2);
    REQUIRE(Careful().num_parameters() == expected);
    Forgetful broken;
    REQUIRE(broken.num_parameters() == 40);  // fc2's 18 parameters are invisible...
    REQUIRE(broken.num_parameters() != expected);
    // ...to the optimizer, to zero_grad and to save() as well.
    for (const auto& [name, _] : broken.state_dict()) REQUIRE(name.rfind("fc1.", 0) == 0);
}

TEST_CASE("train() and eval() reach every descendant", "[nn][module]") {
    auto inner = std::make_shared<nn::Sequential>();
    auto fc = std::make_shared<nn::Linear>(2, 2);
    inner->push_back("fc", fc);
    struct Net : nn::Module {} net;
    net.register_module("inner", inner);
    REQUIRE(net.is_training());
    REQUIRE(fc->is_training());
    net.eval();
    REQUIRE_FALSE(net.is_training());
    REQUIRE_FALSE(inner->is_training());
    REQUIRE_FALSE(fc->is_training());
    net.train();
    REQUIRE(net.is_training());
    REQUIRE(inner->is_training());
    REQUIRE(fc->is_training());
    net.train(false);
    REQUIRE_FALSE(fc->is_training());
}

TEST_CASE("zero_grad(true) drops gradients - zero_grad(false) fills them with zeros", "[nn][module]") {
    nn::Linear fc(3, 2);
    Tensor x = ones({4, 3});
    fc.forward(x).sum().backward();
    // dL/db = Σ_rows 1 = 4 for each output; dL/dW[j, i] = Σ_rows x = 4.
    require_values(fc.bias.grad(), {4, 4});
    require_values(fc.weight.grad(), {{4, 4, 4}, {4, 4, 4}});

    fc.zero_grad(/*set_to_none=*/false);
    REQUIRE(fc.weight.grad().defined());
    require_values(fc.weight.grad(), {{0, 0, 0}, {0, 0, 0}});
    require_values(fc.bias.grad(), {0, 0});

    fc.forward(x).sum().backward();
    require_values(fc.bias.grad(), {4, 4});  // accumulated onto the zeros
    fc.zero_grad();  // set_to_none = true, PyTorch's default
    REQUIRE_FALSE(fc.weight.has_grad());
    REQUIRE_FALSE(fc.bias.has_grad());
    fc.zero_grad(false);  // no gradient to fill: stays undefined
    REQUIRE_FALSE(fc.weight.has_grad());

    // A zeroed row-sparse gradient stays a gradient with k = 0 rows (PyTorch's sparse zero_()).
    nn::Embedding emb(4, 2, nn::EmbeddingOptions().sparse(true));
    emb.forward(IndexTensor{1, 2}).sum().backward();
    REQUIRE(emb.weight.sparse_grad() != nullptr);
    emb.zero_grad(false);
    REQUIRE(emb.weight.sparse_grad() != nullptr);
    REQUIRE(emb.weight.sparse_grad()->indices.empty());
    REQUIRE(emb.weight.sparse_grad()->values.shape() == ArrayShape{0, 2});
    emb.zero_grad();
    REQUIRE_FALSE(emb.weight.has_grad());
}

TEST_CASE("register_parameter and register_module refuse bad names", "[nn][module]") {
    struct M : nn::Module {} m;
    m.register_parameter("w", zeros({2}));
    m.register_module("sub", std::make_shared<nn::Linear>(1, 1));

    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("a.b", zeros({1})); }),
               Contains("register_parameter") && Contains("'a.b'") && Contains("'.'"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("", zeros({1})); }),
               Contains("non-empty"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("w", zeros({1})); }),
               Contains("'w' is already registered"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("sub", zeros({1})); }),
               Contains("'sub' is already a submodule"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("u", Tensor()); }),
               Contains("undefined"));
    Tensor leaf({1, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("v", leaf * 2); }),
               Contains("leaf"));

    CHECK_THAT(message_of<ValueError>([&] { m.register_module("x.y", std::make_shared<nn::Tanh>()); }),
               Contains("register_module") && Contains("'x.y'"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("sub", std::make_shared<nn::Tanh>()); }),
               Contains("'sub' is already registered"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("w", std::make_shared<nn::Tanh>()); }),
               Contains("'w' is already a parameter"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("n", std::shared_ptr<nn::Tanh>()); }),
               Contains("null"));
    // Nothing was added by the failed calls.
    REQUIRE(m.named_parameters().size() == 3);  // w, sub.weight, sub.bias
    REQUIRE(m.named_children().size() == 1);
}

TEST_CASE("a name holding a control character is refused: the model checks hold one name per line",
          "[nn][module][regression]") {
    // DDP's ranks compare a text of one line per parameter: a name "a (2)\nparameter b" would make
    // one parameter read as two, and two different models compare equal.
    struct M : nn::Module {} m;
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("a (2)\nparameter b", zeros({2})); }),
               Contains("register_parameter") && Contains("control character"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("tab\there", zeros({2})); }),
               Contains("register_buffer") && Contains("control character"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module(std::string("nul\0", 4), std::make_shared<nn::Tanh>()); }),
               Contains("register_module") && Contains("control character"));
    m.register_parameter("Gewicht_\xc3\xa4", zeros({1}));  // UTF-8 (ä) is fine
    REQUIRE(m.named_parameters().size() == 1);
    REQUIRE(m.named_children().empty());
}

TEST_CASE("hostile: a module tree with a cycle is refused - not walked forever", "[nn][module][hostile][regression]") {
    // Walking a cycle in named_parameters() or train() would recurse until the stack overflows.
    auto a = std::make_shared<nn::Sequential>();
    auto b = std::make_shared<nn::Sequential>();
    a->push_back("b", b);
    CHECK_THAT(message_of<ValueError>([&] { b->push_back("a", a); }),
               Contains("register_module") && Contains("cycle"));
    CHECK_THAT(message_of<ValueError>([&] { a->push_back("self", a); }), Contains("cycle"));
    REQUIRE(a->size() == 1);
    REQUIRE(b->size() == 0);
    REQUIRE(a->num_parameters() == 0);
    a->eval();  // terminates
    REQUIRE_FALSE(b->is_training());
}

TEST_CASE("a parameter shared by two modules (weight tying) is listed once", "[nn][module][regression]") {
    // As PyTorch's named_parameters(): the optimizer must update a shared tensor once per
    // step, num_parameters() counts it once, and a checkpoint stores it once. The first name
    // in traversal order (own parameters, then children) wins.
    struct Tied : nn::Module {
        std::shared_ptr<nn::Embedding> emb;
        Tied() {
            emb = register_module("emb", std::make_shared<nn::Embedding>(7, 4));
            register_parameter("bias", zeros({7}));
            register_parameter("decoder_weight", emb->weight);  // the output layer reuses E
        }
        // logits (N, V) = E[ids] Eᵀ + bias
        Tensor forward(const IndexTensor& ids) const {
            return F::linear(emb->forward(ids), named_parameters()[1].second, named_parameters()[0].second);
        }
    } tied;
    std::vector<std::string> names;
    for (const auto& [n, _] : tied.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"bias", "decoder_weight"});
    REQUIRE(tied.num_parameters() == 7 + 7 * 4);  // not 7 + 2·28
    REQUIRE(tied.named_parameters()[1].second.impl() == tied.emb->weight.impl());
    // Both uses contribute to the one gradient.
    tied.forward(IndexTensor{2}).sum().backward();
    REQUIRE(tied.emb->weight.grad().defined());

    // Sharing a whole submodule under two names also counts it once.
    struct Twice : nn::Module {
        Twice() {
            auto fc = std::make_shared<nn::Linear>(3, 3);
            register_module("a", fc);
            register_module("b", fc);
        }
    } twice;
    REQUIRE(twice.num_parameters() == 12);
    REQUIRE(twice.named_parameters().size() == 2);
    REQUIRE(twice.named_parameters()[0].first == "a.weight");

    // The checkpoint round trip works with the deduplicated names.
    TempDir dir;
    tied.save(dir.file("tied.safetensors"));
    Tied other;
    other.load(dir.file("tied.safetensors"));
    REQUIRE(bits_equal(other.emb->weight, tied.emb->weight));
}

// =============================================================================================
// state_dict / load_state_dict
// =============================================================================================

TEST_CASE("state_dict shares handles - load_state_dict copies values", "[nn][state_dict]") {
    manual_seed(1);
    TinyNet a;
    manual_seed(2);
    TinyNet b;
    REQUIRE_FALSE(bits_equal(a.fc->weight, b.fc->weight));
    NamedTensors sd = a.state_dict();
    REQUIRE(sd.size() == 3);
    REQUIRE(sd[1].second.impl() == a.fc->weight.impl());

    b.load_state_dict(sd);
    for (std::size_t i = 0; i < 3; ++i) REQUIRE(bits_equal(a.state_dict()[i].second, b.state_dict()[i].second));
    // A copy, not an alias: changing a afterwards leaves b alone.
    a.fc->weight.mutable_data()(0, 0) = 123;
    REQUIRE(b.fc->weight.at({0, 0}) != 123);
    // The order of the entries does not matter, only the names.
    NamedTensors reversed(sd.rbegin(), sd.rend());
    b.load_state_dict(reversed);
    REQUIRE(b.fc->weight.at({0, 0}) == 123);
}

TEST_CASE("load_state_dict: missing - unexpected or mis-shaped entries throw and change nothing",
          "[nn][state_dict]") {
    manual_seed(3);
    TinyNet net;
    const Snapshot before = snapshot(net);
    manual_seed(4);
    TinyNet other;
    const NamedTensors good = other.state_dict();

    SECTION("missing") {
        NamedTensors sd(good.begin(), good.begin() + 2);  // no fc.bias
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("load_state_dict") && Contains("missing") && Contains("'fc.bias'"));
    }
    SECTION("unexpected") {
        NamedTensors sd = good;
        sd.emplace_back("fc.extra", zeros({2}));
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("unexpected") && Contains("'fc.extra'"));
    }
    SECTION("wrong shape") {
        NamedTensors sd = good;
        sd[1].second = zeros({3, 2});  // fc.weight is (2, 3)
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("'fc.weight'") && Contains("(2, 3)") && Contains("(3, 2)"));
    }
    SECTION("wrong shape in the last entry, after valid ones") {
        NamedTensors sd = good;
        sd[2].second = zeros({3});
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }), Contains("'fc.bias'"));
    }
    SECTION("undefined tensor") {
        NamedTensors sd = good;
        sd[0].second = Tensor();
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("'emb.weight'") && Contains("undefined"));
    }
    SECTION("duplicate entry") {
        NamedTensors sd = good;
        sd.push_back(good[0]);
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("duplicate") && Contains("'emb.weight'"));
    }
    require_unchanged(net, before);
}

TEST_CASE("a small model trains end to end: Embedding → Linear → cross_entropy", "[nn][integration]") {
    // Memorise 4 (id → class) pairs: the loss must fall from ~log 3 to near 0.
    manual_seed(13);
    TinyNet net;  // V = 5, d = 3, 2 classes
    IndexTensor ids{0, 1, 2, 3};
    IndexTensor y{0, 1, 1, 0};
    float first = 0, last = 0;
    for (int step = 0; step < 200; ++step) {
        Tensor loss = F::cross_entropy(net.forward(ids), y);
        if (step == 0) first = loss.item();
        last = loss.item();
        net.zero_grad();
        loss.backward();
        NoGradGuard no_grad;
        for (auto& p : net.parameters()) p.mutable_data() -= real(0.5) * p.grad().data();  // plain SGD
    }
    REQUIRE(first > 0.3);
    REQUIRE(last < 0.05);
    REQUIRE(net.emb->weight.grad().at({4, 0}) == 0);  // row 4 was never looked up
}

// =============================================================================================
// Buffers
// =============================================================================================

TEST_CASE("register_buffer: in state_dict and named_buffers - not in named_parameters", "[nn][buffer]") {
    Scaled m;
    REQUIRE(names_of(m.named_parameters()) == std::vector<std::string>{"fc.weight", "fc.bias"});
    REQUIRE(m.parameters().size() == 2);
    REQUIRE(m.num_parameters() == 12 + 4);
    REQUIRE(names_of(m.named_buffers()) == std::vector<std::string>{"scale", "child.offset"});
    // PyTorch's order: a module's parameters, then its buffers, then its children's.
    REQUIRE(names_of(m.state_dict()) == std::vector<std::string>{"scale", "fc.weight", "fc.bias", "child.offset"});
    // The handle returned is the tensor stored: the same impl, not a copy.
    REQUIRE(m.named_buffers()[0].second.impl() == m.scale.impl());
    // A buffer never requires grad, even if the tensor given did.
    struct M : nn::Module {} g;
    Tensor t = g.register_buffer("b", ones({2}, /*requires_grad=*/true));
    REQUIRE_FALSE(t.requires_grad());
    // So backward through the forward leaves it without a gradient.
    m.forward(ones({2, 3})).sum().backward();
    REQUIRE_FALSE(m.scale.has_grad());
    REQUIRE(m.fc->weight.has_grad());
}

TEST_CASE("register_buffer refuses bad names - taken names - undefined and non-leaf tensors", "[nn][buffer]") {
    struct M : nn::Module {} m;
    m.register_parameter("w", zeros({2}));
    m.register_buffer("b", zeros({2}));
    m.register_module("sub", std::make_shared<nn::Linear>(1, 1));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("a.b", zeros({1})); }),
               Contains("register_buffer") && Contains("'a.b'"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("b", zeros({1})); }),
               Contains("buffer 'b' is already registered"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("w", zeros({1})); }),
               Contains("'w' is already a parameter's name"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("b", zeros({1})); }),
               Contains("'b' is already a buffer's name"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("b", std::make_shared<nn::Tanh>()); }),
               Contains("'b' is already a buffer's name"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("sub", zeros({1})); }),
               Contains("'sub' is already a submodule's name"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("u", Tensor()); }), Contains("undefined"));
    Tensor leaf({1, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { m.register_buffer("v", leaf * 2); }), Contains("leaf"));
    REQUIRE(names_of(m.named_buffers()) == std::vector<std::string>{"b"});  // nothing was added
}

TEST_CASE("a module with a buffer round-trips through save and load", "[nn][buffer][serialize]") {
    TempDir dir;
    Scaled a;
    a.scale.mutable_data() = Array({5, 6, 7, 8});
    a.save(dir.file("a.safetensors"));
    // The file holds the buffers beside the parameters.
    REQUIRE(names_of(nn::load_safetensors(dir.file("a.safetensors")).tensors).size() == 4);

    Scaled b;  // different random weights, scale = 1 2 3 4, offset = 0.5 -0.5
    b.offset.mutable_data() = Array({{9, 9}});
    b.load(dir.file("a.safetensors"));
    require_unchanged(b, snapshot(a));
    xgrad::testing::require_values(b.scale, Tensor({5, 6, 7, 8}), 0);
    xgrad::testing::require_values(b.offset, Tensor({{0.5, -0.5}}), 0);
    // Loading copies values into the module's own handles (the forward reads them).
    REQUIRE(b.named_buffers()[0].second.impl() == b.scale.impl());
    REQUIRE_FALSE(b.scale.requires_grad());
}

TEST_CASE("an optimizer never changes a buffer", "[nn][buffer][optim]") {
    Scaled m;
    const Tensor scale_before = m.scale.detach(), offset_before = m.offset.detach();
    const Tensor w_before = m.fc->weight.detach();
    optim::Adam opt(m.named_parameters(), optim::AdamOptions(0.1));
    REQUIRE(opt.memory_report().rows.size() == 2);  // fc.weight, fc.bias: no buffer
    for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        m.forward(ones({2, 3})).pow(2).sum().backward();
        opt.step();
    }
    m.zero_grad(false);
    REQUIRE(bits_equal(m.scale, scale_before));
    REQUIRE(bits_equal(m.offset, offset_before));
    REQUIRE_FALSE(bits_equal(m.fc->weight, w_before));  // the parameters did move
}

TEST_CASE("hostile: load with a missing or mis-shaped buffer throws and leaves the module untouched",
          "[nn][buffer][serialize][hostile]") {
    TempDir dir;
    Scaled source;
    source.scale.mutable_data() = Array({-1, -2, -3, -4});
    Scaled m;
    const Snapshot before = snapshot(m);

    SECTION("missing") {
        NamedTensors without;  // every entry but child.offset
        for (const auto& [n, t] : source.state_dict())
            if (n != "child.offset") without.emplace_back(n, t);
        nn::save_safetensors(dir.file("f"), without);
        CHECK_THAT(message_of<ValueError>([&] { m.load(dir.file("f")); }),
                   Contains("missing buffer 'child.offset'") && Contains("(1, 2)"));
        CHECK_THAT(message_of<ValueError>([&] { m.load_state_dict(without); }),
                   Contains("missing buffer 'child.offset'"));
    }
    SECTION("mis-shaped") {
        NamedTensors wrong = source.state_dict();
        for (auto& [n, t] : wrong)
            if (n == "scale") t = zeros({5});
        nn::save_safetensors(dir.file("f"), wrong);
        CHECK_THAT(message_of<ValueError>([&] { m.load(dir.file("f")); }),
                   Contains("buffer 'scale' has shape (4) in the model but (5)"));
    }
    SECTION("unexpected") {
        NamedTensors extra = source.state_dict();
        extra.emplace_back("child.other", zeros({1}));
        CHECK_THAT(message_of<ValueError>([&] { m.load_state_dict(extra); }), Contains("'child.other'"));
    }
    require_unchanged(m, before);
}

// register_buffer turned requires_grad off on the caller's handle. Registering a tensor that is
// a parameter elsewhere (another module's weight, shared as a buffer) silently stopped that
// parameter's training: it kept its place in named_parameters() but never got a gradient.
TEST_CASE("hostile: register_buffer leaves a parameter given to it trainable", "[hostile][regression]") {
    nn::Linear lin(2, 1, /*bias=*/false);
    struct Holder : nn::Module {} holder;
    const Tensor b = holder.register_buffer("w", lin.weight);
    CHECK(lin.weight.requires_grad());  // still a parameter of lin
    CHECK_FALSE(b.requires_grad());     // the buffer never requires grad
    require_values(b, lin.weight);      // holding the same values
    lin.forward(Tensor({{1, 2}})).sum().backward();
    REQUIRE(lin.weight.has_grad());
    require_values(lin.weight.grad(), Tensor({{1, 2}}));
    CHECK_FALSE(b.has_grad());
    // A tensor that does not require grad is stored as given (the same handle).
    const Tensor c = zeros({3});
    CHECK(holder.register_buffer("c", c).impl() == c.impl());
}

// =============================================================================================
// bug 8: deep module trees
// =============================================================================================

TEST_CASE("ckpt bug 8: a 100000-deep module tree is walked and destroyed without recursion",
          "[ckpt][module][regression]") {
    constexpr int kDepth = 100000;
    struct Node : nn::Module {};
    auto root = std::make_shared<Node>();
    root->register_parameter("b", zeros({1}));
    nn::Module* deepest = root.get();
    for (int i = 0; i < kDepth; ++i) {
        auto child = std::make_shared<Node>();
        deepest->register_module("m", child);
        deepest = child.get();
    }
    Tensor w = deepest->register_parameter("w", Tensor({1, 2}));

    const NamedTensors named = root->named_parameters();  // Module::collect
    REQUIRE(named.size() == 2);
    REQUIRE(named[0].first == "b");
    std::string deep_name;
    for (int i = 0; i < kDepth; ++i) deep_name += "m.";
    REQUIRE(named[1].first == deep_name + "w");
    REQUIRE(named[1].second.impl() == w.impl());
    REQUIRE(root->num_parameters() == 3);

    root->eval();  // Module::train
    REQUIRE_FALSE(deepest->is_training());
    root->train();
    REQUIRE(deepest->is_training());

    w.set_grad(Tensor({1, 1}));
    root->zero_grad();
    REQUIRE_FALSE(w.grad().defined());

    // A cycle is refused: Module::contains walks the whole chain.
    CHECK_THAT(message_of<ValueError>([&] { deepest->register_module("loop", root); }), Contains("cycle"));

    // state_dict and load_state_dict.
    NamedTensors sd = root->state_dict();
    sd[1].second = Tensor({5, 6});
    root->load_state_dict(sd);
    REQUIRE(w.data()(1) == 6);

    root.reset();  // ~Module on a chain of 100,000
}

TEST_CASE("a parameter's name is its dotted path in the module tree", "[module][regression]") {
    struct Net : nn::Module {
        std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    } net;
    net.fc->bias.mutable_data() = zeros({5}).data();
    REQUIRE_THROWS_WITH(net.fc->forward(ones({1, 3})), Contains("parameter 'fc.bias'") && Contains("(2)") &&
                                                           Contains("(5)"));
    net.fc->bias.set_data(zeros({2}).data());
    REQUIRE(net.fc->forward(ones({1, 3})).shape() == Shape{1, 2});
}

// ---- constructors under extreme sizes ----------------------------------------------------------
namespace {

constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();
// Sizes no module takes (ValueError), and 2^45: a valid size whose arrays (2^47 bytes and more)
// no 64-bit address space holds (OutOfMemoryError). None of them is ever allocated.
const std::vector<std::int64_t> kExtreme = {0, -1, kMin64, std::int64_t(1) << 45, std::int64_t(1) << 62, kMax64};

// make() must be refused by `op` itself: a ValueError whose message begins "op: ", or an
// OutOfMemoryError; never a result, another module's message, or undefined behaviour (UBSan).
void require_refused_by(const std::string& op, const std::string& args, const std::function<void()>& make) {
    INFO(op << "(" << args << ")");
    try {
        make();
        FAIL("constructed");
    } catch (const ValueError& e) {
        INFO(e.what());
        REQUIRE(std::string(e.what()).rfind(op + ": ", 0) == 0);
    } catch (const OutOfMemoryError&) {
        SUCCEED();
    }
}

// Each pair (a, b) of kExtreme ∪ {valid}, but (valid, valid).
template <class F>
void for_pairs(std::int64_t valid_a, std::int64_t valid_b, F&& f) {
    std::vector<std::int64_t> as = kExtreme, bs = kExtreme;
    as.push_back(valid_a), bs.push_back(valid_b);
    for (std::int64_t a : as)
        for (std::int64_t b : bs)
            if (a != valid_a || b != valid_b) f(a, b, fmt::format("{}, {}", a, b));
}

}  // namespace

TEST_CASE("every module's constructor refuses extreme sizes in its own words, before any overflow",
          "[module][errors][regression]") {
    using nn::CausalSelfAttentionOptions;
    for_pairs(2, 3, [](std::int64_t a, std::int64_t b, const std::string& s) {
        require_refused_by("Linear", s, [&] { nn::Linear(a, b); });
        require_refused_by("Embedding", s, [&] { nn::Embedding(a, b); });
        require_refused_by("LearnedPositions", s, [&] { nn::LearnedPositions(a, b); });
        require_refused_by("SwiGLU", s, [&] { nn::SwiGLU(a, b); });
        require_refused_by("CausalSelfAttention", s, [&] { nn::CausalSelfAttention(a, b); });
        require_refused_by("CausalSelfAttention", s + ", LLaMA names",
                           [&] { nn::CausalSelfAttention(a, b, CausalSelfAttentionOptions().llama_names(true)); });
    });
    require_refused_by("CausalSelfAttention", "1 << 62, 1", [] { nn::CausalSelfAttention(std::int64_t(1) << 62, 1); });
    for (std::int64_t n : kExtreme) {
        const std::string s = std::to_string(n);
        require_refused_by("LayerNorm", s, [&] { nn::LayerNorm{n}; });
        require_refused_by("RMSNorm", s, [&] { nn::RMSNorm{n}; });
        require_refused_by("sinusoidal_positions", s, [&] { nn::sinusoidal_positions(n, 4); });
        if (n != 0)  // 0 K/V heads means n_head
            require_refused_by("CausalSelfAttention", "8, 2, n_kv_head " + s,
                               [&] { nn::CausalSelfAttention(8, 2, CausalSelfAttentionOptions().n_kv_head(n)); });
        if (n <= 0) {
            require_refused_by("KVCache", s, [&] { nn::KVCache{n}; });
        } else {  // a valid limit: the cache allocates at its first append, which refuses
            require_refused_by("KVCache::append", s, [&] {
                nn::KVCache cache(n);
                const Array k = ones({1, 1, 1, 4}).data();
                cache.append(k, k);
                throw std::logic_error("KVCache::append accepted max_len " + s);
            });
        }
    }
    for (double p : {-0.5, 1.5, std::nan(""), HUGE_VAL}) {
        require_refused_by("Dropout", std::to_string(p), [&] { nn::Dropout{p}; });
        require_refused_by("CausalSelfAttention", "8, 2, dropout " + std::to_string(p),
                           [&] { nn::CausalSelfAttention(8, 2, CausalSelfAttentionOptions().dropout(p)); });
    }
    require_refused_by("CausalSelfAttention", "6, 2, rope", [] {
        nn::CausalSelfAttention(6, 2, CausalSelfAttentionOptions().rope(true));  // head width 3 is odd
    });
}
