// nn/activation.hpp — activation functions as modules (no parameters), for nn::Sequential.
//   Tanh: y = tanh(x)    ReLU: y = max(x, 0)    GELU: y = x·Φ(x)       any shape → same shape
#pragma once

#include "nn/functional.hpp"
#include "nn/module.hpp"

namespace xgrad::nn {

struct Tanh : Module {
    Tensor forward(const Tensor& x) const { return functional::tanh(x); }
};
struct ReLU : Module {
    Tensor forward(const Tensor& x) const { return functional::relu(x); }
};
struct GELU : Module {
    Tensor forward(const Tensor& x) const { return functional::gelu(x); }
};

}  // namespace xgrad::nn
