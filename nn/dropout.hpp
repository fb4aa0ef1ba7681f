// nn/dropout.hpp — dropout: the functional form and the Dropout module.
// Legend: x any shape; the mask has x's shape.
// In training each element is kept with probability 1 - p and scaled by 1/(1 - p) ("inverted
// dropout"), so E[y] = x and evaluation needs no rescaling (math in nn/dropout.cpp).
// ref: Srivastava et al. 2014, "Dropout: A Simple Way to Prevent Neural Networks from
// Overfitting"; PyTorch docs, torch.nn.functional.dropout
#pragma once

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

namespace functional {

// Dropout. x any shape, dtype real; y has x's shape.
//   training = false or p = 0: the identity (returns x itself); p = 1: y = 0 and dL/dx = 0.
// A dropped ±inf or NaN gives NaN, as PyTorch. manual_seed(s) reproduces the mask.
// Throws ValueError for an undefined x, or p outside [0, 1] or NaN.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace functional

// Dropout(p): dropout(x, p, is_training()), the identity after eval(); ValueError as dropout's.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) const { return functional::dropout(x, p_, is_training()); }
    double p() const { return p_; }

private:
    double p_;
};

}  // namespace xgrad::nn
