// nn/lora_file.hpp — a LoRA adapter saved alone, in the folder layout Hugging Face PEFT writes:
//
//   dir/adapter_model.safetensors   base_model.model.<path>.lora_A.weight (r, in), .lora_B.weight (out, r);
//                                   an Embedding's .lora_embedding_A (r, V), .lora_embedding_B (d, r)
//   dir/adapter_config.json         {"peft_type": "LORA", "r", "lora_alpha", "lora_dropout", "use_rslora",
//                                    "target_modules": [<path>, ...], "fan_in_fan_out": false, ...}
//
// fan_in_fan_out false: W is (out, in), as in torch.nn.Linear. Adapters on parts of a fused output
// (nn/lora.hpp, LoRAOptions::parts) add a key of xgrad's; PEFT has no such layout and cannot apply
// their stacked tensors (loralib's MergedLinear can):
//   "xgrad_lora_parts": {<path>: {"sizes": [d, e, e], "adapted": [true, false, true]}, ...}
// ref: PEFT docs, LoraConfig and save_pretrained; loralib, MergedLinear (enable_lora)
#pragma once

#include <string>

#include <xgrad/nn/module.hpp>
#include <xgrad/nn/serialize.hpp>

namespace xgrad::nn {

// Writes the adapters of `model` into `dir` (created if missing): each file atomically, the config
// last, its CRC-32 in the tensor file (a save that fails leaves the previous pair whole). Throws
// ValueError for a model without adapter or adapters of different options; std::runtime_error for
// a file that cannot be written (naming it).
void save_adapter(const Module& model, const std::string& dir);

// Copies the adapter in `dir` into `model`, adapted beforehand at the same paths with the same
// options (nn::apply_lora with the config's target_modules), all checked first, the model untouched
// by a refusal: ValueError naming the file and value for an adapter of `model` merged (unmerge()
// first), a missing or damaged file, a config changed since saving, other options or parts, a
// missing, extra or mis-shaped tensor; std::runtime_error for an unreadable file. A folder without
// xgrad's checksum and CRC-32 (PEFT's save_pretrained) loads, unverified, only with
// LoadOptions().require_checksum(false); PEFT keys that change the math throw (fan_in_fan_out, bias,
// modules_to_save, use_dora, rank_pattern, alpha_pattern); F16 files too.
void load_adapter(Module& model, const std::string& dir, const LoadOptions& options = LoadOptions());

}  // namespace xgrad::nn
