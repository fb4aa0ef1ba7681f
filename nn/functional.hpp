// nn/functional.hpp — the stateless layers and losses (torch.nn.functional), in one include.
//
// Each functional form lives beside its module (nn/linear, embedding, activation, loss, attention); the
// activations below are the core ops under their torch.nn.functional names.
#pragma once

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/activation.hpp>
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/loss.hpp>

namespace xgrad::nn::functional {

inline Tensor relu(const Tensor& x) { return xgrad::relu(x); }
inline Tensor tanh(const Tensor& x) { return xgrad::tanh(x); }
inline Tensor sigmoid(const Tensor& x) { return xgrad::sigmoid(x); }

}  // namespace xgrad::nn::functional
