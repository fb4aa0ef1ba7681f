// examples/gpt/lora.hpp — fine-tuning with LoRA (nn/lora.hpp): the --lora-* flags' adapters on a
// loaded base, and what a LoRA run prints and writes. README.md, "Fine-tuning with LoRA".
//
//   --lora-targets     the Linear layers adapted, by path (gpt2; --arch llama: Meta's names)
//     attention        attn.c_attn (the fused q|k|v) and attn.c_proj
//     mlp              mlp.c_fc and mlp.c_proj
//     all              attention and mlp, and the head lm_head when it is untied (--no-tie)
//     embedding        transformer.wte, the token table (when nn/lora.hpp adapts an Embedding)
#pragma once

#include <string>
#include <vector>

#include <xgrad/nn/lora.hpp>

#include "common/outputs.hpp"  // FinalSaves
#include "config.hpp"
#include "model.hpp"

namespace gpt {

// The dotted paths --lora-targets names for a model of `arch` ("gpt2", "llama") with the head
// tied or not, e.g. "attention,mlp" → {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}.
// Throws std::invalid_argument naming --lora-targets for an unknown or repeated word, an empty
// list, "all" with a head tied to the token table, or "embedding" (not adaptable yet).
std::vector<std::string> lora_target_paths(const std::string& list, const std::string& arch, bool tied);

// The adapter's settings from the flags: r = --lora-rank, α = --lora-alpha (0: r, so s = α/r = 1).
xgrad::nn::LoRAOptions lora_options(const Config& cfg);

// --lora-rank r > 0: freezes every weight of `model` and adds an adapter to each targeted Linear
// (nn::apply_lora), so that the optimizer built next sees the adapters alone. Prints the layers
// adapted and the trainable and frozen parameter counts (nn::count_parameters) when `print`.
// Does nothing for r = 0.
void add_adapters(const Config& cfg, LanguageModel& model, bool print = true);

// The weights with every adapter merged, W + s·B·A (nn::LoRA::merge, on a copy: `model` keeps
// its frozen W bit for bit), under the base model's names, without lora_A and lora_B: a plain
// model of the same shape loads them.
NamedTensors merged_weights(const Config& cfg, const LanguageModel& model);

// At the end of a LoRA run (rank 0): the adapter folder --out/adapter (nn::save_adapter: PEFT's
// adapter_model.safetensors and adapter_config.json), with its size printed.
void save_adapter_folder(const Config& cfg, const LanguageModel& model, examples::FinalSaves& saves);

// Bytes of the files directly in `dir` (0 if it does not exist).
std::uintmax_t folder_bytes(const std::string& dir);

}  // namespace gpt
