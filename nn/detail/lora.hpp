// nn/detail/lora.hpp — the option checks add_lora and apply_lora share (nn/lora.cpp), for the
// Embedding's adapter in nn/lora_embedding.cpp. Not installed.
#pragma once

#include <cstdint>

#include <xgrad/nn/lora.hpp>

namespace xgrad::nn::detail {

// Throw ValueError, naming add_lora, the value and its range, for options no adapter of a
// Linear in → out (or of an Embedding of V rows of d features) takes.
void check_lora_options(std::int64_t in, std::int64_t out, const LoRAOptions& options);
void check_embedding_lora_options(std::int64_t V, std::int64_t d, const LoRAOptions& options);

}  // namespace xgrad::nn::detail
