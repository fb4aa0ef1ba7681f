// nn/linear.hpp — Linear: y = x Wᵀ + b.
//
//   x (..., in)  →  y (..., out),   weight W (out, in),   bias b (out)
//
// Initialisation as in PyTorch: W and b ~ U(-1/√in, 1/√in) (kaiming_uniform with a = √5
// reduces to this bound for W). ref: PyTorch docs, torch.nn.Linear
#pragma once

#include <cstdint>

#include "nn/functional.hpp"
#include "nn/module.hpp"

namespace xgrad::nn {

class Linear : public Module {
public:
    // Throws ValueError if in_features or out_features is not positive.
    Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);

    // x (..., in) → (..., out). Throws ValueError if x's last dim is not in_features.
    Tensor forward(const Tensor& x) const { return functional::linear(x, weight, bias); }

    std::int64_t in_features() const { return in_; }
    std::int64_t out_features() const { return out_; }

    Tensor weight;  // (out, in)
    Tensor bias;    // (out), or undefined when bias = false

private:
    std::int64_t in_, out_;
};

}  // namespace xgrad::nn
