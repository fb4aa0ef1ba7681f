// tests/examples/test_gpt_generate.cpp — nn::generate (nn/generate.hpp) on the GPT and LLaMA
// models of examples/gpt: the KV cache gives recompute's tokens and logits.
//
// A tiny model (V 11, L 2, H 4, d 16, block 8) with weights drawn N(0, 0.5), large enough that
// attention is far from uniform, continues a 3-id prompt by 12 ids, once through forward() over
// the whole context per step (nanoGPT's generate) and once through the KV cache, from the same
// seed. The window passes the block at the 6th new id, so the cache's rebuild of the cropped
// window is exercised too. Every step's logits must agree to 1e-5 (relative to the largest) and
// the ids must be identical, for the four position schemes of GPT-2's block and for LLaMA's
// block with 1, 2 and 4 K/V heads.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "examples/gpt/generate.hpp"
#include "examples/gpt/model.hpp"
#include "examples/gpt/report.hpp"

// Inside a namespace of this file: the tests are compiled in batches (unity builds), and a
// using-directive at file scope would reach the other files of the batch.
namespace test_gpt_generate {
using namespace gpt;

namespace {

GPTConfig tiny(const std::string& arch, const std::string& pos, std::int64_t n_kv_head = 0) {
    GPTConfig c;
    c.vocab = 11, c.block = 8, c.n_layer = 2, c.n_head = 4, c.d = 16, c.pos = pos;
    c.arch = arch, c.n_kv_head = n_kv_head, c.bias = arch == "gpt2";
    return c;
}

void require_cache_equals_recompute(const GPTConfig& c) {
    xgrad::manual_seed(3);
    const std::unique_ptr<LanguageModel> model = make_model(c);
    {
        xgrad::NoGradGuard no_grad;
        for (auto& [name, p] : model->named_parameters()) xgrad::nn::init::normal_(p, 0.0, 0.5);
    }
    const Ids prompt{1, 7, 4};
    auto o = nn::GenerationOptions().max_new_tokens(12).temperature(1.0);
    std::mt19937_64 rng_a(42), rng_b(42);
    nn::GenerationStats cached, recomputed;
    cached.record_logits = recomputed.record_logits = true;
    const Ids a = nn::generate(*model, prompt, o.use_cache(true), rng_a, &cached);
    const Ids b = nn::generate(*model, prompt, o.use_cache(false), rng_b, &recomputed);
    const auto& with = cached.logits;
    const auto& without = recomputed.logits;
    REQUIRE(a == b);
    // Positions run: steps 0..4 see windows of 3..7 ids and step 5 of 8, all inside the block;
    // steps 6..11 slide it (6 rebuilds of 8). Cached: 3, then 1 per step to 8, then 8 per step.
    REQUIRE(recomputed.positions_run == 3 + 4 + 5 + 6 + 7 + 8 + 6 * 8);
    REQUIRE(cached.positions_run == 3 + 5 * 1 + 6 * 8);
    REQUIRE(cached.rebuilds == 6);
    REQUIRE(cached.cache_bytes.size() == 2);
    REQUIRE(recomputed.cache_bytes.empty());
    REQUIRE(with.size() == 12);
    for (std::size_t step = 0; step < with.size(); ++step) {
        double diff = 0, scale = 0;
        for (std::size_t v = 0; v < with[step].size(); ++v) {
            diff = std::max(diff, std::abs(double(with[step][v]) - double(without[step][v])));
            scale = std::max(scale, std::abs(double(without[step][v])));
        }
        INFO("step " << step << ": max |cached − recomputed| " << diff << ", max |logit| " << scale);
        REQUIRE(scale > 0.5);  // logits far from 0: the comparison means something
        REQUIRE(diff <= 1e-5 * scale);
    }
    // The draws differ from another seed's: the ids are sampled, not fixed by the model alone.
    std::mt19937_64 rng_c(7);
    REQUIRE(nn::generate(*model, prompt, o, rng_c) != a);
}

}  // namespace

TEST_CASE("generate: the KV cache gives recompute's ids and logits, past the block", "[gpt][generate]") {
    for (const char* pos : {"learned", "sinusoidal", "rope", "none"}) {
        INFO("gpt2, pos " << pos);
        require_cache_equals_recompute(tiny("gpt2", pos));
    }
    for (std::int64_t kv : {1, 2, 4}) {
        INFO("llama, n_kv_head " << kv);
        require_cache_equals_recompute(tiny("llama", "rope", kv));
    }
}

TEST_CASE("generate: forward_cached fills each layer's cache and refuses to pass the block", "[gpt][generate]") {
    const std::unique_ptr<LanguageModel> model = make_model(tiny("llama", "rope", 2));
    std::vector<xgrad::nn::KVCache> caches = model->make_kv_caches();
    REQUIRE(caches.size() == 2);
    const Tensor out = model->forward_cached(IndexTensor({{1, 2, 3}}), caches);
    REQUIRE(out.shape() == Shape{1, 3, 11});
    REQUIRE(caches[1].length() == 3);
    // 2 (k, v) · L 2 · Hkv 2 · hd 4 · 4 bytes = 128 bytes per position
    REQUIRE(model->kv_cache_bytes_per_token() == 128);
    REQUIRE(caches[0].bytes() == 2 * 2 * 8 * 4 * sizeof(real));  // k, v (1, 2, block 8, 4)
    REQUIRE_THROWS_WITH(model->forward_cached(IndexTensor({{1, 2, 3, 4, 5, 6}}), caches),
                        Catch::Contains("sequence length T = 6 after 3 cached positions exceeds the block size 8"));
    REQUIRE(caches[0].length() == 3);  // the refused call appended nothing
}

TEST_CASE("generate: refusals", "[gpt][generate]") {
    const std::unique_ptr<LanguageModel> model = make_model(tiny("gpt2", "learned"));
    std::mt19937_64 rng(1);
    nn::GenerationOptions o;
    REQUIRE_THROWS_WITH(nn::generate(*model, {}, o, rng), Catch::Contains("at least one id"));
    REQUIRE_THROWS_AS(nn::generate(*model, {11}, o.max_new_tokens(1), rng), xgrad::IndexError);
    REQUIRE_THROWS_WITH(nn::generate(*model, {1}, o.stop_tokens({11}), rng),
                        Catch::Contains("stop token 11 is outside [0, 11)"));
    // A temperature so small that z / T overflows: the largest logit wins (greedy, as top-k 1)
    std::mt19937_64 rng_t(3), rng_k(3), rng_g(3);
    const auto tiny_t = nn::GenerationOptions().max_new_tokens(8).temperature(1e-320);
    const auto top1 = nn::GenerationOptions().max_new_tokens(8).top_k(1);
    const Ids greedy = nn::generate(*model, {1, 2}, top1, rng_k);
    REQUIRE(nn::generate(*model, {1, 2}, tiny_t, rng_t) == greedy);
    REQUIRE(nn::generate(*model, {1, 2}, nn::GenerationOptions().max_new_tokens(8).do_sample(false), rng_g) == greedy);
    GPTConfig bad = tiny("gpt3", "learned");
    REQUIRE_THROWS_WITH(make_model(bad), Catch::Contains("arch 'gpt3' is not one of gpt2, llama"));
}

// nanoGPT's model.eval() around estimate_loss and generate: with dropout on, evaluation and
// sampling must give what the same weights give with dropout 0, and leave the mode as it was.
TEST_CASE("evaluation and sampling run in eval mode: dropout off, the mode restored", "[gpt][generate][regression]") {
    for (const char* arch : {"gpt2", "llama"}) {
        INFO(arch);
        GPTConfig c = tiny(arch, arch == std::string("gpt2") ? "learned" : "rope");
        c.dropout = 0.5;
        xgrad::manual_seed(1);
        const std::unique_ptr<LanguageModel> dropped = make_model(c);
        c.dropout = 0;
        const std::unique_ptr<LanguageModel> plain = make_model(c);
        plain->load_state_dict(dropped->state_dict());
        Ids data(100);
        for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::int64_t((i * 7) % 11);
        const double want = evaluate_fixed(*plain, data, 2, 2);
        REQUIRE(dropped->is_training());
        REQUIRE(evaluate_fixed(*dropped, data, 2, 2) == want);
        REQUIRE(dropped->is_training());
        const auto o = nn::GenerationOptions().max_new_tokens(10);
        std::mt19937_64 rng_a(5), rng_b(5);
        REQUIRE(nn::generate(*dropped, {1, 2}, o, rng_a) == nn::generate(*plain, {1, 2}, o, rng_b));
        REQUIRE(dropped->is_training());
    }
}

}  // namespace test_gpt_generate
