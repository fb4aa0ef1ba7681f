// tests/examples/test_gpt_llama.cpp — examples/gpt's LLaMA block (llama.hpp) against PyTorch.
//
// tests/reference/llama_reference.safetensors, written by tests/reference/make_llama_reference.py
// from bench/llama.py (Meta's model.py layout and names): V 17, L 2, H 4, d 16 (hd 4), SwiGLU
// hidden 64, block T 8, batch B 2, in three variants: "gqa" (2 K/V heads, tied head), "mqa"
// (1 K/V head, untied), "mha" (4 K/V heads, tied). Checked as gpt_reference.hpp says: logits and
// loss to 1e-5, gradients to 1e-4, 10 AdamW steps to 1e-5 (relative).
#include <catch2/catch.hpp>

#include "examples/gpt/llama.hpp"
#include "examples/gpt_reference.hpp"

// Inside a namespace of this file: the tests are compiled in batches (unity builds), and a
// using-directive at file scope would reach the other files of the batch.
namespace test_gpt_llama {
using namespace gpt;

namespace {

void check_llama(const std::string& variant, std::int64_t n_kv_head, bool tie) {
    GPTConfig c;
    c.arch = "llama", c.pos = "rope", c.bias = false;
    c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 4, c.d = 16, c.n_kv_head = n_kv_head, c.tie = tie;
    xgrad::manual_seed(0);
    Llama model(c);
    gpt::testing::check_model_against("llama_reference.safetensors", variant, model);
}

}  // namespace

TEST_CASE("llama reference: grouped-query attention and the tied head match PyTorch", "[gpt][llama][reference]") {
    check_llama("gqa", 2, true);
}

TEST_CASE("llama reference: multi-query attention and an untied head match PyTorch", "[gpt][llama][reference]") {
    check_llama("mqa", 1, false);
}

TEST_CASE("llama reference: multi-head attention matches PyTorch", "[gpt][llama][reference]") {
    check_llama("mha", 4, true);
}

TEST_CASE("llama model: Meta's names and shapes, and the parameter count by hand", "[gpt][llama]") {
    GPTConfig c;
    c.arch = "llama", c.pos = "rope", c.bias = false;
    c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 4, c.d = 16, c.n_kv_head = 2;
    Llama model(c);
    // tok_embeddings 17·16 = 272; per layer: wq, wo 16·16, wk, wv 8·16 (2 K/V heads of 4), w1, w3
    // 64·16, w2 16·64, two RMSNorm weights 16 → 512 + 256 + 3072 + 32 = 3872; norm 16.
    REQUIRE(model.num_parameters() == 272 + 2 * 3872 + 16);
    const auto params = model.named_parameters();
    REQUIRE(params.front().first == "tok_embeddings.weight");
    REQUIRE(params[1].first == "layers.0.attention.wq.weight");
    REQUIRE(params[2].first == "layers.0.attention.wk.weight");
    REQUIRE(params[2].second.shape() == Shape{8, 16});
    REQUIRE(params.back().first == "norm.weight");
    for (const auto& [name, p] : params) REQUIRE(name.find("bias") == std::string::npos);
    c.pos = "learned";
    REQUIRE_THROWS_WITH(Llama(c), Catch::Contains("Llama: pos learned: arch llama always uses rope positions"));
    c.pos = "rope", c.bias = true;
    REQUIRE_THROWS_WITH(Llama(c), Catch::Contains("Llama: arch llama has no biases: set bias false"));
    c.bias = false, c.n_kv_head = 3;
    REQUIRE_THROWS_WITH(Llama(c), Catch::Contains("Llama: n_kv_head 3 does not divide n_head 4"));
}

}  // namespace test_gpt_llama
