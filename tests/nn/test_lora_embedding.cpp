// tests/nn/test_lora_embedding.cpp — LoRA on an Embedding (nn/lora.hpp, LoRAEmbedding): equal to the
// base at A = 0, hand numbers, merge and unmerge with non-zero A and B, the row-sparse gradient of
// Aᵀ, the names, apply_lora by path, a table tied to a head, and the adapter file's PEFT names.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

// wte (10 × 4) and head (Linear 4 → 3): a token table and a layer after it; tied: a head 4 → 10 sharing wte.
struct Tiny : nn::Module {
    std::shared_ptr<nn::Embedding> wte;
    std::shared_ptr<nn::Linear> head;
    explicit Tiny(std::uint64_t seed, bool tie = false, nn::EmbeddingOptions options = {}) {
        manual_seed(seed);
        auto transformer = register_module("transformer", std::make_shared<nn::Module>());
        wte = transformer->register_module("wte", std::make_shared<nn::Embedding>(10, 4, options));
        head = register_module("head", std::make_shared<nn::Linear>(4, tie ? 10 : 3, /*bias=*/false));
        if (tie) nn::tie_weights(*head, *wte);
    }
};

}  // namespace

TEST_CASE("LoRA Embedding: at A = 0 the adapted table equals the base bit for bit, its names and shapes", "[nn][lora]") {
    Tiny model(1);
    const IndexTensor ids{{1, 7, 7}, {0, 9, 3}};
    const Array base = model.wte->forward(ids).data();
    const auto paths = nn::apply_lora(model, {"wte"}, nn::LoRAOptions().rank(2).alpha(4));
    CHECK(paths == std::vector<std::string>{"transformer.wte"});
    nn::LoRAEmbedding& lora = *model.wte->lora();
    CHECK(lora.A->weight.shape() == Shape{10, 2});  // Aᵀ (V, r)
    CHECK(lora.B->weight.shape() == Shape{4, 2});   // B (d, r)
    CHECK(xt::amax(xt::abs(lora.A->weight.data()))() == 0);
    CHECK(xt::amax(xt::abs(lora.B->weight.data()))() > 0);  // N(0, 1): A = 0 alone starts it at the base
    CHECK(bits_equal(model.wte->forward(ids).data(), base));
    CHECK_FALSE(model.wte->weight.requires_grad());
    std::vector<std::string> names;
    for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"transformer.wte.weight", "transformer.wte.lora_embedding_A.weight",
                                            "transformer.wte.lora_embedding_B.weight", "head.weight"});
    const auto adapted = nn::adapted_layers(model);
    REQUIRE(adapted.size() == 1);
    CHECK(adapted[0].first == "transformer.wte");
    CHECK(adapted[0].second == &lora);
    CHECK(nn::count_parameters(model).trainable == 2 * (10 + 4));
}

TEST_CASE("LoRA Embedding: y = E[ids] + s·(Aᵀ[ids]) Bᵀ on hand numbers, and merge E += s·(B·A)ᵀ", "[nn][lora]") {
    // V = 3, d = 2, r = 1, α = 2 (s = 2): E = [[1, 2], [3, 4], [5, 6]], Aᵀ = [[1], [0], [-1]], B = [[1], [2]].
    nn::Embedding table(3, 2);
    table.weight.mutable_data() = Tensor({{1, 2}, {3, 4}, {5, 6}}).data();
    nn::LoRAEmbedding& lora = nn::add_lora(table, nn::LoRAOptions().rank(1).alpha(2));
    lora.A->weight.mutable_data() = Tensor({{1}, {0}, {-1}}).data();
    lora.B->weight.mutable_data() = Tensor({{1}, {2}}).data();
    // ids [2, 0]: E rows [[5, 6], [1, 2]]; Aᵀ[ids] = [-1, 1]; s·Aᵀ[ids]·Bᵀ = [[-2, -4], [2, 4]]
    const IndexTensor ids{2, 0};
    CHECK(bits_equal(table.forward(ids).data(), Tensor({{3, 2}, {3, 6}}).data()));
    table.eval();  // merging is for inference
    lora.merge();  // row v += s·Aᵀ[v]·Bᵀ: [2, 4], [0, 0], [-2, -4]
    CHECK(bits_equal(table.weight.data(), Tensor({{3, 6}, {3, 4}, {3, 2}}).data()));
    CHECK(bits_equal(table.forward(ids).data(), Tensor({{3, 2}, {3, 6}}).data()));
    lora.unmerge();
    CHECK(bits_equal(table.weight.data(), Tensor({{1, 2}, {3, 4}, {5, 6}}).data()));
}

TEST_CASE("LoRA Embedding: merged equals unmerged with non-zero A and B, unmerge restores E", "[nn][lora]") {
    manual_seed(3);
    nn::Embedding table(50, 16);
    const Tensor E0 = Tensor(table.weight.data());
    nn::LoRAEmbedding& lora = nn::add_lora(table, nn::LoRAOptions().rank(4).alpha(8));
    lora.A->weight.mutable_data() = randn({50, 4}).data() * real(0.1);  // an update of E's size, not 8× it
    const IndexTensor ids{{3, 49, 0, 3}, {17, 8, 8, 1}};
    const Array unmerged = table.forward(ids).data();
    CHECK_FALSE(bits_equal(unmerged, nn::functional::embedding(table.weight, ids).data()));
    lora.enabled(false);
    CHECK(bits_equal(table.forward(ids).data(), nn::functional::embedding(table.weight, ids).data()));
    lora.enabled(true);
    table.eval();
    lora.merge();
    CHECK(xt::amax(xt::abs(table.forward(ids).data() - unmerged))() <= 1e-5f * xt::amax(xt::abs(unmerged))());
    lora.unmerge();
    CHECK(xt::amax(xt::abs(table.weight.data() - E0.data()))() <= 1e-6f);
}

TEST_CASE("LoRA Embedding: only the rows of Aᵀ looked up get gradient, row-sparse with sparse(true)", "[nn][lora]") {
    for (const bool sparse : {false, true}) {
        INFO("sparse " << sparse);
        manual_seed(4);
        nn::Embedding table(6, 3, nn::EmbeddingOptions().sparse(sparse));
        nn::LoRAEmbedding& lora = nn::add_lora(table, nn::LoRAOptions().rank(2));
        const IndexTensor ids{1, 4, 1};
        table.forward(ids).pow(2).sum().backward();
        CHECK_FALSE(table.weight.grad().defined());  // E frozen: no scatter into it
        CHECK(lora.B->weight.grad().defined());
        if (sparse) {
            REQUIRE(lora.A->weight.sparse_grad() != nullptr);
            CHECK(lora.A->weight.sparse_grad()->indices == std::vector<std::int64_t>{1, 4});
        } else {
            // L = Σ y²: dL/dAᵀ[v] = Σ_{p: ids[p] = v} s·(2 y_p) B, non-zero for v = 1, 4 alone
            const Array g = lora.A->weight.grad().data();
            for (std::size_t v = 0; v < 6; ++v) {
                INFO("row " << v);
                const bool looked_up = v == 1 || v == 4;
                CHECK((xt::amax(xt::abs(xt::view(g, v, xt::all())))() > 0) == looked_up);
            }
        }
    }
    // Adam's lazy row-sparse update moves the rows looked up, and no other.
    manual_seed(5);
    nn::Embedding table(6, 3, nn::EmbeddingOptions().sparse(true));
    nn::LoRAEmbedding& lora = nn::add_lora(table, nn::LoRAOptions().rank(2));
    optim::Adam opt(lora.A->named_parameters(), optim::AdamOptions(0.1));
    table.forward(IndexTensor{2, 5}).pow(2).sum().backward();
    opt.step();
    for (std::size_t v = 0; v < 6; ++v) {
        INFO("row " << v);
        CHECK((xt::amax(xt::abs(xt::view(lora.A->weight.data(), v, xt::all())))() > 0) == (v == 2 || v == 5));
    }
}

TEST_CASE("LoRA Embedding: a table tied to a head trains its adapter, and refuses merge", "[nn][lora]") {
    // The head's W is the table: merging s·(B·A)ᵀ into E would move every logit as well.
    Tiny model(2, /*tie=*/true);
    nn::apply_lora(model, {"transformer.wte"}, nn::LoRAOptions().rank(2));
    nn::LoRAEmbedding& lora = *model.wte->lora();
    lora.A->weight.mutable_data() = randn({10, 2}).data();
    const Tensor E0 = Tensor(model.wte->weight.data());
    CHECK_THROWS_WITH(lora.merge(), Contains("tied to an output head") && Contains("unmerged"));
    CHECK_FALSE(lora.merged());
    CHECK_THROWS_WITH(nn::merged_state_dict(model), Contains("tied to an output head"));
    CHECK(bits_equal(model.wte->weight.data(), E0.data()));
    CHECK_FALSE(model.head->weight.requires_grad());  // the head's W is the frozen table
    // Tying after adapting is refused too: the head would take a frozen table.
    nn::Embedding wte(10, 4);
    nn::Linear head(4, 10, false);
    nn::add_lora(wte, nn::LoRAOptions().rank(2));
    CHECK_THROWS_WITH(nn::tie_weights(head, wte), Contains("has a LoRA adapter") && Contains("before nn::add_lora"));
    CHECK(head.weight.requires_grad());
}

TEST_CASE("LoRA Embedding: add_lora refuses a second adapter, a bad rank, parts", "[nn][lora]") {
    nn::Embedding table(10, 4);
    CHECK_THROWS_WITH(nn::add_lora(table, nn::LoRAOptions().rank(5)), Contains("rank r = 5 is outside [1, 4]"));
    CHECK_THROWS_WITH(nn::add_lora(table, nn::LoRAOptions().rank(2).parts({2, 2}, {true, false})),
                      Contains("an Embedding's adapter takes none"));
    CHECK(table.weight.requires_grad());
    nn::add_lora(table, nn::LoRAOptions().rank(2));
    CHECK_THROWS_WITH(nn::add_lora(table, nn::LoRAOptions().rank(2)), Contains("Embedding (10 × 4) has an adapter already"));
}

TEST_CASE("save_adapter writes an Embedding's adapter under PEFT's names and layouts", "[nn][lora]") {
    TempDir dir;
    Tiny a(1);
    nn::apply_lora(a, {"wte", "head"}, nn::LoRAOptions().rank(2).alpha(4));
    a.wte->lora()->A->weight.mutable_data() = randn({10, 2}).data();
    a.head->lora()->B->weight.mutable_data() = randn({3, 2}).data();
    nn::save_adapter(a, dir.file("adapter"));
    const nn::SafetensorsFile file = nn::load_safetensors(dir.file("adapter/adapter_model.safetensors"));
    REQUIRE(file.tensors.size() == 4);
    CHECK(file.tensors[0].first == "base_model.model.transformer.wte.lora_embedding_A");
    CHECK(file.tensors[0].second.shape() == Shape{2, 10});  // PEFT's (r, V)
    CHECK(bits_equal(file.tensors[0].second.data(), transpose(a.wte->lora()->A->weight, 0, 1).data()));
    CHECK(file.tensors[1].first == "base_model.model.transformer.wte.lora_embedding_B");
    CHECK(file.tensors[1].second.shape() == Shape{4, 2});   // (d, r)
    CHECK(file.tensors[2].first == "base_model.model.head.lora_A.weight");
    const std::string config = read_bytes(dir.file("adapter/adapter_config.json"));
    CHECK_THAT(config, Contains("\"transformer.wte\""));

    Tiny b(1);
    nn::apply_lora(b, {"wte", "head"}, nn::LoRAOptions().rank(2).alpha(4));
    const IndexTensor ids{{1, 2}, {9, 9}};
    const auto logits = [](Tiny& m, const IndexTensor& t) { return m.head->forward(m.wte->forward(t)).data(); };
    CHECK_FALSE(bits_equal(logits(b, ids), logits(a, ids)));
    nn::load_adapter(b, dir.file("adapter"));
    CHECK(bits_equal(logits(b, ids), logits(a, ids)));
    CHECK(bits_equal(b.wte->lora()->A->weight.data(), a.wte->lora()->A->weight.data()));
}
