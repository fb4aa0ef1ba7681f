// nn/init.hpp — initialisers that overwrite a tensor's values in place, as torch.nn.init.
//
//   normal_(w, mean, std)       w ~ N(mean, std²)
//   uniform_(w, a, b)           w ~ U[a, b)
//   zeros_, ones_, constant_    w = 0, 1, val
//   xavier_uniform_(w, gain)    U(±gain·√(6 / (fan_in + fan_out)))           Glorot & Bengio 2010
//   xavier_normal_(w, gain)     N(0, gain²·2 / (fan_in + fan_out))
//   kaiming_uniform_(w, a, ...) U(±gain·√(3 / fan)),  gain = calculate_gain(nonlinearity, a)   He et al. 2015
//   kaiming_normal_(w, a, ...)  N(0, gain² / fan)
// Fans of w (out, in, k...): fan_in = in·Πk, fan_out = out·Πk (a conv's receptive field Πk).
// Each writes through mutable_data() under a NoGradGuard (no graph; the version is bumped), draws
// from the process generator (manual_seed) and returns w. The modules' defaults are PyTorch's:
// Linear U(±1/√in) = kaiming_uniform_(w, a = √5); Embedding N(0, 1). Why a tied head wants GPT-2's
// normal_(w, 0, 0.02) instead: README.md, "Your own project".
// ref: PyTorch docs, torch.nn.init; Radford et al. 2019 (GPT-2), nanoGPT model.py _init_weights.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::init {

// Throws ValueError naming `op` unless std ≥ 0.
Tensor normal_(Tensor w, double mean = 0.0, double std = 1.0);
// Throws ValueError unless a ≤ b.
Tensor uniform_(Tensor w, double a = 0.0, double b = 1.0);
Tensor constant_(Tensor w, double val);
Tensor zeros_(Tensor w);
Tensor ones_(Tensor w);

// (fan_in, fan_out) of w (out, in, k...); throws ValueError for fewer than 2 dims (as PyTorch).
std::pair<std::int64_t, std::int64_t> _calculate_fan_in_and_fan_out(const Tensor& w);

// The gain that keeps a layer's output variance equal to its input's after `nonlinearity`:
//   linear, conv*, sigmoid: 1;  tanh: 5/3;  relu: √2;  selu: 3/4;
//   leaky_relu: √(2 / (1 + slope²)), slope = param (0.01 when unset).
// Throws ValueError for another name.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

// Throw ValueError for fewer than 2 dims.
Tensor xavier_uniform_(Tensor w, double gain = 1.0);
Tensor xavier_normal_(Tensor w, double gain = 1.0);

// mode: "fan_in" (keeps the forward's variance) or "fan_out" (the backward's). a: the leaky_relu
// slope handed to calculate_gain. A tensor with no values is returned unchanged (PyTorch warns).
// Throw ValueError for fewer than 2 dims, another mode, or an unknown nonlinearity.
Tensor kaiming_uniform_(Tensor w, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
Tensor kaiming_normal_(Tensor w, double a = 0.0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu");

}  // namespace xgrad::nn::init
