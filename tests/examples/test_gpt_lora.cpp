// tests/examples/test_gpt_lora.cpp — examples/gpt fine-tuning with LoRA (lora.hpp): the targets the
// --lora-targets words name, AdamW over the adapters alone, and the merged weights of --merge-lora.
// The whole program (resume, the frozen base, the MPI traffic) is tests/gpt_lora.sh.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "examples/gpt/lora.hpp"
#include "examples/gpt/model.hpp"
#include "test_helpers.hpp"

namespace test_gpt_lora {
using namespace gpt;
using xgrad::Tensor;

GPTConfig tiny(bool tie) {
    GPTConfig c;
    c.vocab = 11, c.block = 8, c.n_layer = 2, c.n_head = 2, c.d = 8, c.tie = tie;
    return c;
}

Config lora_flags(int rank, const std::string& targets) {
    Config cfg;
    cfg.lora_rank = rank, cfg.lora_targets = targets;
    return cfg;
}

TEST_CASE("gpt lora: --lora-targets names the model's Linear paths", "[gpt][lora]") {
    using V = std::vector<std::string>;
    REQUIRE(lora_targets("attention", "gpt2", true).paths == V{"attn.c_attn", "attn.c_proj"});
    REQUIRE(lora_targets("mlp,attention", "gpt2", true).paths == V{"mlp.c_fc", "mlp.c_proj", "attn.c_attn", "attn.c_proj"});
    // all: attention and mlp, and the head only when it is not the token table
    REQUIRE(lora_targets("all", "gpt2", true).paths == V{"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"});
    REQUIRE(lora_targets("all", "gpt2", false).paths.back() == "lm_head");
    REQUIRE(lora_targets("attention,all", "gpt2", true).paths.size() == 4);  // a path named twice, adapted once
    REQUIRE(lora_targets("attention", "llama", true).paths ==
            V{"attention.wq", "attention.wk", "attention.wv", "attention.wo"});
    REQUIRE(lora_targets("all", "llama", false).paths.back() == "output");
    // q, k, v: parts of gpt2's fused attn.c_attn; llama's own wq, wk, wv
    const LoRATargets qv = lora_targets("q,v,mlp", "gpt2", true);
    REQUIRE(qv.paths == V{"mlp.c_fc", "mlp.c_proj"});
    REQUIRE(qv.qkv == std::vector<bool>{true, false, true});
    REQUIRE(lora_targets("k", "llama", true).paths == V{"attention.wk"});
    REQUIRE(lora_targets("embedding", "gpt2", true).paths == V{"transformer.wte"});
    using xgrad::testing::message_of;
    REQUIRE_THAT(message_of<std::invalid_argument>([] { lora_targets("q,attention", "gpt2", true); }),
                 Catch::Contains("adapt parts of attn.c_attn"));
    REQUIRE_THAT(message_of<std::invalid_argument>([] { lora_targets("attn", "gpt2", true); }),
                 Catch::Contains("unknown target 'attn'"));
    REQUIRE_THAT(message_of<std::invalid_argument>([] { lora_targets("mlp,mlp", "gpt2", true); }),
                 Catch::Contains("'mlp' given twice"));
    REQUIRE_THAT(message_of<std::invalid_argument>([] { lora_targets("mlp,", "gpt2", true); }),
                 Catch::Contains("an empty target"));
}

TEST_CASE("gpt lora: AdamW after add_adapters holds the adapters alone, and a step leaves the base as it was",
          "[gpt][lora][regression]") {
    xgrad::manual_seed(3);
    GPT model(tiny(true));
    add_adapters(lora_flags(2, "all"), model, /*print=*/false);
    const xgrad::nn::ParameterCounts n = xgrad::nn::count_parameters(model);
    // 2 blocks × r 2 × (c_attn (8 → 24): 32, c_proj 16, c_fc (8 → 32): 40, mlp.c_proj 40) = 512
    REQUIRE(n.trainable == 512);
    std::vector<std::pair<std::string, xgrad::Array>> frozen_before;  // copies of the frozen weights
    for (const auto& [name, p] : model.named_parameters())
        if (!p.requires_grad()) frozen_before.emplace_back(name, p.data());
    auto opt = make_adamw(model, 1e-2, 0.9, 0.99, 0.1);  // weight decay 0.1 on every ≥2-D tensor it holds
    std::size_t held = 0;
    for (const auto& g : opt->param_groups())
        for (const auto& [name, p] : g.params) {
            REQUIRE(p.requires_grad());
            REQUIRE((name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos));
            held += std::size_t(p.numel());
        }
    REQUIRE(held == 512);
    const xgrad::IndexTensor x(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {1, 8});  // (B 1, T 8)
    const xgrad::IndexTensor y(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 8});
    for (int step = 0; step < 3; ++step) train_step(model, *opt, x, y, 1.0);
    REQUIRE(opt->memory_report().total().exp_avg_bytes == 512 * sizeof(xgrad::real));
    std::size_t i = 0;
    for (const auto& [name, p] : model.named_parameters()) {
        if (p.requires_grad()) continue;
        REQUIRE(frozen_before[i].first == name);
        REQUIRE(p.data() == frozen_before[i].second);  // bit for bit
        ++i;
    }
    REQUIRE(i == frozen_before.size());
}

TEST_CASE("gpt lora: the merged weights (q, v and mlp adapted) load into a plain model that "
          "computes the adapted logits", "[gpt][lora]") {
    xgrad::manual_seed(5);
    GPT model(tiny(false));
    add_adapters(lora_flags(2, "q,v,mlp"), model, /*print=*/false);
    std::mt19937_64 rng(9);
    std::normal_distribution<double> normal(0.0, 0.5);
    for (const auto& [path, adapter] : xgrad::nn::adapted_layers(model)) {  // B ≠ 0: a merge that moves W
        REQUIRE(adapter->parameters().size() == 2);
        for (auto& b : adapter->parameters()[1].mutable_data()) b = xgrad::real(normal(rng));
    }
    const NamedTensors merged = xgrad::nn::merged_state_dict(model);
    for (const auto& [name, t] : merged) REQUIRE(name.find("lora") == std::string::npos);
    GPT plain(tiny(false));
    plain.load_state_dict(merged);
    std::vector<std::int64_t> ids(16);
    for (std::size_t t = 0; t < ids.size(); ++t) ids[t] = std::int64_t(3 * t % 11);
    const xgrad::IndexTensor x(ids, {2, 8});  // (B 2, T 8)
    const Tensor a = model.forward(x), b = plain.forward(x);  // (2, 8, 11)
    double worst = 0, moved = 0;
    for (std::size_t k = 0; k < a.data().size(); ++k) worst = std::max(worst, double(std::abs(a.data()[k] - b.data()[k])));
    REQUIRE(worst <= 1e-5);
    // and the adapters changed the logits: the test would pass for B = 0 otherwise
    for (const auto& [path, adapter] : xgrad::nn::adapted_layers(model)) adapter->enabled(false);
    const Tensor base = model.forward(x);
    for (std::size_t k = 0; k < a.data().size(); ++k) moved = std::max(moved, double(std::abs(a.data()[k] - base.data()[k])));
    REQUIRE(moved > 1e-2);
}

}  // namespace test_gpt_lora
