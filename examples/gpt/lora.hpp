// examples/gpt/lora.hpp — fine-tuning with LoRA (nn/lora.hpp): the --lora-* flags' adapters on a
// loaded base, and what a LoRA run prints and writes. README.md, "Fine-tuning with LoRA".
//
//   --lora-targets     the layers adapted, by path (gpt2; --arch llama: Meta's names)
//     attention        attn.c_attn (the fused q|k|v) and attn.c_proj
//     q, k, v          parts of attn.c_attn only, e.g. "q,v" (LoRAOptions::parts: rows d, e, e)
//     mlp              mlp.c_fc and mlp.c_proj
//     all              attention and mlp, and the head lm_head when it is untied (--no-tie)
//     embedding        transformer.wte, the token table
#pragma once

#include <string>
#include <vector>

#include <xgrad/nn/lora.hpp>

#include "common/outputs.hpp"  // FinalSaves
#include "config.hpp"
#include "model.hpp"

namespace gpt {

// What --lora-targets names for a model: whole layers by dotted path, and for gpt2's fused
// attn.c_attn the parts q, k, v adapted (empty: none).
struct LoRATargets {
    std::vector<std::string> paths;  // e.g. {"attn.c_proj", "mlp.c_fc", "mlp.c_proj"}
    std::vector<bool> qkv;           // {q, k, v} of attn.c_attn, e.g. {true, false, true} for "q,v"
};

// The targets of a comma list of attention, q, k, v, mlp, all, embedding for a model of `arch`
// ("gpt2", "llama") with the head tied or not. Throws std::invalid_argument naming --lora-targets
// for an unknown or repeated word, an empty list, or q, k, v beside attention or all (which adapt
// the whole attn.c_attn).
LoRATargets lora_targets(const std::string& list, const std::string& arch, bool tied);

// The adapter's settings from the flags: r = --lora-rank, α = --lora-alpha (0: r, so s = α/r = 1).
xgrad::nn::LoRAOptions lora_options(const Config& cfg);

// --lora-rank r > 0: freezes every weight of `model` and adds an adapter to each targeted layer
// (nn::apply_lora), so that the optimizer built next sees the adapters alone. Prints the layers
// adapted and the trainable and frozen parameter counts (nn::count_parameters) when `print`.
// Does nothing for r = 0.
void add_adapters(const Config& cfg, LanguageModel& model, bool print = true);

// At the end of a LoRA run (rank 0): the adapter folder --out/adapter (nn::save_adapter: PEFT's
// adapter_model.safetensors and adapter_config.json), with its size printed.
void save_adapter_folder(const Config& cfg, const LanguageModel& model, examples::FinalSaves& saves);

// Why the checkpoint at `path` cannot be loaded with this run's --lora-* flags, said by the flags
// (a full run's checkpoint resumed with them, a LoRA run's without them or with others), or "" if
// the flags agree or the file cannot be read. `resume`: for --resume (else --init-from, where a full
// run's checkpoint is a base to adapt). Called when a load failed, to replace a message by tensor name.
std::string lora_flags_mismatch(const std::string& path, const Config& cfg, bool resume);

// Bytes of the files directly in `dir` (0 if it does not exist).
std::uintmax_t folder_bytes(const std::string& dir);

}  // namespace gpt
