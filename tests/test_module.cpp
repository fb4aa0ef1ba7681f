// tests/test_module.cpp — value tests for nn::Module (registration, dotted names, counting,
// modes, zero_grad, bad names, cycles, tied parameters), state_dict / load_state_dict,
// nn::Sequential, and a small model trained end to end (float32 build).
//
// Legend: B batch, T time, V vocabulary, d width, C classes, N rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

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

    // A sparse gradient cannot be "zero-filled" in place; both modes drop it.
    nn::Embedding emb(4, 2, nn::EmbeddingOptions().set_sparse(true));
    emb.forward(IndexTensor{1, 2}).sum().backward();
    REQUIRE(emb.weight.sparse_grad() != nullptr);
    emb.zero_grad(false);
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
    a.fc->weight.at({0, 0}) = 123;
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

TEST_CASE("Sequential: names by position or given - forward is the composition", "[nn][sequential]") {
    manual_seed(12);
    auto fc1 = std::make_shared<nn::Linear>(3, 4);
    auto fc2 = std::make_shared<nn::Linear>(4, 2);
    nn::Sequential net;
    net.push_back(fc1).push_back(std::make_shared<nn::Tanh>()).push_back(fc2);
    REQUIRE(net.size() == 3);
    std::vector<std::string> names;
    for (const auto& [n, _] : net.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    REQUIRE(net.num_parameters() == (3 * 4 + 4) + (4 * 2 + 2));
    Tensor x = randn({5, 3});
    REQUIRE(bits_equal(net.forward(x), fc2->forward(tanh(fc1->forward(x)))));

    nn::Sequential named;
    named.push_back("fc1", std::make_shared<nn::Linear>(3, 4))
        .push_back("act", std::make_shared<nn::GELU>())
        .push_back("fc2", std::make_shared<nn::Linear>(4, 2));
    names.clear();
    for (const auto& [n, _] : named.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    // A duplicate name throws and adds no layer.
    CHECK_THAT(message_of<ValueError>([&] { named.push_back("fc1", std::make_shared<nn::ReLU>()); }),
               Contains("'fc1' is already registered"));
    REQUIRE(named.size() == 3);
    // An empty Sequential is the identity.
    REQUIRE(nn::Sequential().forward(x).impl() == x.impl());
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
        for (auto& p : net.parameters()) p.data() -= real(0.5) * p.grad().data();  // plain SGD
    }
    REQUIRE(first > 0.3);
    REQUIRE(last < 0.05);
    REQUIRE(net.emb->weight.grad().at({4, 0}) == 0);  // row 4 was never looked up
}
