// tests/examples/test_gpt_profile.cpp — the profiler on examples/gpt's step: every op of the
// model's graph and its backward closure are events, for GPT-2's block and LLaMA's.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include <xgrad/core/profiler.hpp>

#include "examples/gpt/model.hpp"
#include "test_helpers.hpp"

namespace test_gpt_profile {  // a namespace of its own: the unity build puts files together
using namespace gpt;
namespace prof = xgrad::profiler;

// A tiny model of each architecture: L 2, H 2, d 16, T 8, V 11, with dropout so that its op runs too.
GPTConfig tiny(const std::string& arch) {
    GPTConfig c;
    c.vocab = 11;
    c.block = 8;
    c.n_layer = 2;
    c.n_head = 2;
    c.d = 16;
    c.dropout = 0.1;
    c.arch = arch;
    if (arch == "llama") {
        c.pos = "rope";
        c.bias = false;
    }
    return c;
}

TEST_CASE("gpt profile: every node of the step's graph has its forward event and its backward event", "[gpt][profiler]") {
    for (const std::string arch : {"gpt2", "llama"}) {
        INFO(arch);
        xgrad::manual_seed(3);
        const auto model = make_model(tiny(arch));
        auto opt = make_adamw(*model, 1e-3, 0.9, 0.99, 0.1);
        const xgrad::IndexTensor x = xgrad::randint(0, 11, {2, 8}), y = xgrad::randint(0, 11, {2, 8});
        (void)train_step(*model, *opt, x, y, 1.0);  // warm: the optimizer's state exists

        std::set<std::string> nodes;  // the ops the step's graph records, by name
        xgrad::visit_graph(xgrad::nn::functional::cross_entropy(model->forward(x), y), [&](const xgrad::TensorImpl& t) {
            if (t.grad_fn) nodes.insert(t.grad_fn->name);
        });
        REQUIRE(nodes.size() >= 8);

        prof::Profiler p;
        (void)train_step(*model, *opt, x, y, 1.0);
        const prof::Profile& r = p.stop();
        std::map<std::string, int> forward, backward;
        for (const prof::Event& e : r.events) {
            if (e.kind == prof::Kind::op) ++forward[e.name];
            if (e.kind == prof::Kind::backward) ++backward[e.name];
        }
        for (const std::string& op : nodes) {
            INFO(op);
            REQUIRE(forward.count(op) == 1);
            REQUIRE(backward.count(op + " backward") == 1);
        }
        REQUIRE(forward.count("linear") + forward.count("matmul") > 0);
        REQUIRE(backward.size() <= forward.size());
    }
}

}  // namespace test_gpt_profile
