// nn/lora_file.hpp — a LoRA adapter saved alone, in the folder layout Hugging Face PEFT writes:
//
//   dir/adapter_model.safetensors   base_model.model.<path>.lora_A.weight  (r, in)
//                                   base_model.model.<path>.lora_B.weight  (out, r)
//   dir/adapter_config.json         {"peft_type": "LORA", "r": ..., "lora_alpha": ..., "lora_dropout": ...,
//                                    "use_rslora": ..., "target_modules": [<path>, ...],
//                                    "fan_in_fan_out": false, "bias": "none", "inference_mode": true}
//
// A few kilobytes to megabytes beside a base checkpoint of the whole model. fan_in_fan_out is false:
// W is (out, in), as torch.nn.Linear stores it. ref: PEFT docs, LoraConfig and save_pretrained
#pragma once

#include <string>

#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// Writes the adapters of `model` into `dir` (created if missing), each file atomically (nn/serialize.hpp);
// the config's CRC-32 goes into the tensor file's metadata, so that either file changed alone is
// refused on load. Throws ValueError if the model has no adapter or its adapters differ in r, α,
// dropout or scaling rule; std::runtime_error if a file cannot be written (naming it).
void save_adapter(const Module& model, const std::string& dir);

// Copies the adapter in `dir` into `model`, adapted beforehand at the same paths with the same
// options (nn::apply_lora with the config's target_modules). Everything is checked before anything
// is copied, and a refusal leaves the model untouched: a missing file, a damaged tensor file, a
// config changed since it was saved, another r, α, dropout or scaling rule, a missing, unexpected
// or mis-shaped tensor (an adapter of another model) each throws ValueError naming the file and
// the value; a file that cannot be read, std::runtime_error.
void load_adapter(Module& model, const std::string& dir);

}  // namespace xgrad::nn
