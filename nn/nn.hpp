// nn/nn.hpp — everything in xgrad::nn: Module, Embedding, Linear, activations, LayerNorm,
// Dropout, Sequential, ModuleList, attention (composed and fused), the functional layers and
// losses, initialisers (nn::init), safetensors checkpoints, weight tying and positional encodings.
#pragma once

#include "core/ops.hpp"  // the core ops, for programs that include only this header
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/attention_fused.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/functional.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/module.hpp"
#include "nn/module_list.hpp"
#include "nn/normalization.hpp"
#include "nn/positional.hpp"
#include "nn/sequential.hpp"
#include "nn/serialize.hpp"
#include "nn/tying.hpp"
