// nn/nn.hpp — everything in xgrad::nn: Module, Embedding, Linear, activations, LayerNorm,
// RMSNorm, the SwiGLU feed-forward, Dropout, Sequential, ModuleList, attention (the module and
// the composed, fused, tiled and cached kernels), the KV cache, the functional layers and losses,
// initialisers (nn::init), safetensors checkpoints, weight tying, positional encodings,
// generation from any causal language model (nn::CausalLM, nn::generate), and LoRA adapters
// and their files.
#pragma once

#include <xgrad/core/ops.hpp>  // the core ops, for programs that include only this header
#include <xgrad/nn/activation.hpp>
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/cached.hpp>
#include <xgrad/nn/attention/composed.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include <xgrad/nn/attention/tiled.hpp>
#include <xgrad/nn/dropout.hpp>
#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/feed_forward.hpp>
#include <xgrad/nn/functional.hpp>
#include <xgrad/nn/generate.hpp>
#include <xgrad/nn/init.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/lora.hpp>
#include <xgrad/nn/lora_file.hpp>
#include <xgrad/nn/module.hpp>
#include <xgrad/nn/module_list.hpp>
#include <xgrad/nn/normalization.hpp>
#include <xgrad/nn/positional.hpp>
#include <xgrad/nn/sequential.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/nn/tying.hpp>
