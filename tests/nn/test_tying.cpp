// tests/nn/test_tying.cpp — nn::tie_weights (float32): the table is one parameter, listed once
// under its first name, stepped once, one memory-report row, stored once in a checkpoint; its
// gradient is the lookup's scatter plus the head's matmul gradient (dense or sparse table); shape
// mismatches, and `head->weight` reassigned by hand, are refused. Gradcheck: gradcheck_tying.cpp.
//
// Legend: B batch, T time, V vocabulary, d width, N rows.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace F = xgrad::nn::functional;

namespace {

// A GPT-shaped language model head: transformer.wte = Embedding(V, d) registered first, then
// lm_head = Linear(d, V, bias = false), tied. logits (B, T, V) = tanh(E[ids]) Eᵀ.
struct TinyLM : nn::Module {
    std::shared_ptr<nn::Module> transformer = std::make_shared<nn::Module>();
    std::shared_ptr<nn::Embedding> wte;
    std::shared_ptr<nn::Linear> lm_head;
    TinyLM(std::int64_t V, std::int64_t d, bool tie = true, bool sparse = false) {
        wte = transformer->register_module(
            "wte", std::make_shared<nn::Embedding>(V, d, nn::EmbeddingOptions().sparse(sparse)));
        register_module("transformer", transformer);
        lm_head = register_module("lm_head", std::make_shared<nn::Linear>(d, V, /*bias=*/false));
        if (tie) nn::tie_weights(*lm_head, *wte);
    }
    Tensor forward(const IndexTensor& ids) const { return lm_head->forward(wte->forward(ids).tanh()); }
};

const IndexTensor kIds{{0, 3, 3, 1}, {4, 0, 2, 3}};  // (B, T) = (2, 4)

const IndexTensor kTargets{{3, 3, 1, 0}, {0, 2, 3, 4}};

}  // namespace

// =============================================================================================
// Weight tying
// =============================================================================================

TEST_CASE("tie_weights: the table is one parameter listed once under its first name", "[nn][tying]") {
    TinyLM m(/*V=*/5, /*d=*/3);
    REQUIRE(m.lm_head->weight.impl() == m.wte->weight.impl());
    REQUIRE(names_of(m.named_parameters()) == std::vector<std::string>{"transformer.wte.weight"});
    REQUIRE(m.num_parameters() == 5 * 3);  // not 2·15
    REQUIRE(names_of(m.state_dict()) == std::vector<std::string>{"transformer.wte.weight"});
    // The forward reads the table: changing a table value changes the head's logits.
    const Tensor before = m.forward(kIds).detach();
    m.wte->weight.mutable_data()(0, 0) += 1;
    REQUIRE_FALSE(bits_equal(m.forward(kIds), before));

    // Registered the other way round, the head's name wins (first in traversal order).
    struct HeadFirst : nn::Module {
        std::shared_ptr<nn::Linear> head;
        std::shared_ptr<nn::Embedding> emb;
        HeadFirst() {
            head = register_module("head", std::make_shared<nn::Linear>(3, 5));
            emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
            nn::tie_weights(*head, *emb);
        }
    } hf;
    REQUIRE(names_of(hf.named_parameters()) == std::vector<std::string>{"head.weight", "head.bias"});
    REQUIRE(hf.named_parameters()[0].second.impl() == hf.emb->weight.impl());
}

TEST_CASE("tie_weights: stored once in a checkpoint - a tied model loads the single copy", "[nn][tying][serialize]") {
    TempDir dir;
    TinyLM a(5, 3);
    a.save(dir.file("lm.safetensors"));
    const auto file = nn::load_safetensors(dir.file("lm.safetensors"));
    REQUIRE(names_of(file.tensors) == std::vector<std::string>{"transformer.wte.weight"});

    TinyLM b(5, 3);
    b.load(dir.file("lm.safetensors"));
    REQUIRE(bits_equal(b.wte->weight, a.wte->weight));
    REQUIRE(b.lm_head->weight.impl() == b.wte->weight.impl());  // still tied after the load
    REQUIRE(bits_equal(b.forward(kIds), a.forward(kIds)));

    // An untied model has two tables, so strict loading of the tied file names the missing one.
    TinyLM untied(5, 3, /*tie=*/false);
    CHECK_THAT(message_of<ValueError>([&] { untied.load(dir.file("lm.safetensors")); }),
               Contains("missing parameter 'lm_head.weight'"));
}

TEST_CASE("tie_weights: the gradient is the lookup's scatter plus the head's matmul gradient", "[nn][tying]") {
    manual_seed(7);
    TinyLM tied(5, 3);
    // The same model untied: two tables holding the same values, each with its own gradient.
    TinyLM untied(5, 3, /*tie=*/false);
    untied.wte->weight.mutable_data() = tied.wte->weight.data();
    untied.lm_head->weight.mutable_data() = tied.wte->weight.data();

    F::cross_entropy(tied.forward(kIds), kTargets).backward();
    F::cross_entropy(untied.forward(kIds), kTargets).backward();
    const Tensor scatter = untied.wte->weight.grad(), matmul = untied.lm_head->weight.grad();
    // Both parts are there: the lookup touched rows 0 1 2 3 4 here, the head all rows.
    REQUIRE(xt::amax(xt::abs(scatter.data()))() > 1e-3);
    REQUIRE(xt::amax(xt::abs(matmul.data()))() > 1e-3);
    xgrad::testing::require_values(tied.wte->weight.grad(), add(scatter, matmul), 1e-6);
}

TEST_CASE("tie_weights: stepped once - one row in the memory report", "[nn][tying][optim]") {
    TinyLM m(5, 3);
    optim::SGD sgd(m.named_parameters(), optim::SGDOptions(1.0));
    const Tensor before = m.wte->weight.detach();
    F::cross_entropy(m.forward(kIds), kTargets).backward();
    const Tensor g = m.wte->weight.grad().detach();
    sgd.step();
    // W ← W − lr·g once (twice would be W − 2g).
    xgrad::testing::require_values(m.wte->weight, sub(before, g), 1e-6);

    optim::Adam adam(m.named_parameters(), optim::AdamOptions(1e-3));
    m.zero_grad();
    F::cross_entropy(m.forward(kIds), kTargets).backward();
    adam.step();
    const optim::MemoryReport report = adam.memory_report();
    REQUIRE(report.rows.size() == 1);
    REQUIRE(report.rows[0].name == "transformer.wte.weight");
    REQUIRE(report.total().param_bytes == 15 * sizeof(real));
    REQUIRE(report.total().exp_avg_bytes == 15 * sizeof(real));
}

TEST_CASE("hostile: tie_weights with mismatched shapes throws naming both", "[nn][tying][hostile]") {
    nn::Embedding table(5, 3);
    nn::Linear wrong_out(3, 6), transposed(5, 3);
    CHECK_THAT(message_of<ValueError>([&] { nn::tie_weights(wrong_out, table); }),
               Contains("tie_weights") && Contains("(6, 3)") && Contains("(5, 3)") && Contains("Linear(3, 6)") &&
                   Contains("Embedding(5, 3)"));
    CHECK_THAT(message_of<ValueError>([&] { nn::tie_weights(transposed, table); }),
               Contains("(3, 5)") && Contains("(5, 3)"));
    // A failed call leaves the head as it was.
    REQUIRE(wrong_out.weight.impl() == wrong_out.named_parameters()[0].second.impl());
    REQUIRE(wrong_out.weight.impl() != table.weight.impl());
}

TEST_CASE("tie_weights: a sparse table tied to a dense head sums into a dense gradient", "[nn][tying][sparse]") {
    manual_seed(3);
    TinyLM dense(5, 3), sparse(5, 3, /*tie=*/true, /*sparse=*/true);
    sparse.wte->weight.mutable_data() = dense.wte->weight.data();
    F::cross_entropy(dense.forward(kIds), kTargets).backward();
    F::cross_entropy(sparse.forward(kIds), kTargets).backward();
    REQUIRE(sparse.wte->weight.sparse_grad() == nullptr);
    xgrad::testing::require_values(sparse.wte->weight.grad(), dense.wte->weight.grad(), 1e-6);

    // The other order: the lookup's row-sparse gradient is there first, then the head's dense
    // one arrives (two backward passes); the sum is the same dense gradient.
    sparse.zero_grad();
    dense.zero_grad();
    F::cross_entropy(dense.lm_head->forward(ones({2, 3})), IndexTensor{1, 4}).backward();
    const Tensor head_part = dense.wte->weight.grad().detach();
    dense.zero_grad();
    dense.wte->forward(kIds).pow(2).sum().backward();
    const Tensor lookup_part = dense.wte->weight.grad().detach();

    sparse.wte->forward(kIds).pow(2).sum().backward();
    REQUIRE(sparse.wte->weight.sparse_grad() != nullptr);
    F::cross_entropy(sparse.lm_head->forward(ones({2, 3})), IndexTensor{1, 4}).backward();
    REQUIRE(sparse.wte->weight.sparse_grad() == nullptr);
    xgrad::testing::require_values(sparse.wte->weight.grad(), add(head_part, lookup_part), 1e-6);

    // An optimizer steps it as a dense parameter.
    optim::Adam opt(sparse.named_parameters(), optim::AdamOptions(0.1));
    opt.step();
    REQUIRE(opt.memory_report().rows[0].last_update == optim::LastUpdate::dense);
}

TEST_CASE("hostile: head->weight = emb->weight by hand is refused at forward - naming tie_weights",
          "[nn][tying][hostile]") {
    // The PyTorch habit. The head's registered parameter would stay the old tensor: the
    // optimizer would train a tensor that the forward no longer reads.
    auto emb = std::make_shared<nn::Embedding>(5, 3);
    auto head = std::make_shared<nn::Linear>(3, 5);
    head->weight = emb->weight;
    CHECK_THAT(message_of<ValueError>([&] { head->forward(ones({1, 3})); }),
               Contains("Linear") && Contains("'weight'") && Contains("tie_weights"));
    head->bias = zeros({5});
    nn::tie_weights(*head, *emb);  // the supported call repairs the weight...
    CHECK_THAT(message_of<ValueError>([&] { head->forward(ones({1, 3})); }),
               Contains("'bias'"));  // ...but a reassigned bias is refused too
    nn::Linear no_bias(3, 5, false);
    no_bias.bias = zeros({5});
    CHECK_THAT(message_of<ValueError>([&] { no_bias.forward(ones({1, 3})); }), Contains("'bias'"));
    // The same for the table.
    emb->weight = zeros({5, 3});
    CHECK_THAT(message_of<ValueError>([&] { emb->forward(IndexTensor{1}); }),
               Contains("Embedding") && Contains("tie_weights"));
    // Setting values in place is the supported way, and forward accepts it.
    nn::Linear ok(3, 5);
    ok.weight.mutable_data() = xt::zeros<real>({5, 3});
    REQUIRE(ok.forward(ones({1, 3})).shape() == Shape{1, 5});
}
