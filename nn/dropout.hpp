// nn/dropout.hpp — dropout: the functional form and the Dropout module.
//
// Legend: x any shape; the mask has x's shape.
// In training, each element is kept with probability 1 - p and zeroed otherwise; kept elements
// are scaled by 1/(1 - p) ("inverted dropout"), so E[y] = x and evaluation needs no rescaling:
//   mask_i ~ Bernoulli(1 - p),   y = x · mask / (1 - p),   dL/dx = dL/dy · mask / (1 - p)
// ref: Srivastava et al. 2014, "Dropout: A Simple Way to Prevent Neural Networks from
// Overfitting"; PyTorch docs, torch.nn.functional.dropout
#pragma once

#include "core/tensor.hpp"
#include "nn/module.hpp"

namespace xgrad::nn {

namespace functional {

// Dropout. x any shape, dtype real; y has x's shape.
//   training = false, or p = 0: the identity (returns x itself).
//   p = 1: every element dropped: y = 0 and dL/dx = 0 (no division by 1 - p = 0).
// A dropped element is multiplied by 0, so, as in PyTorch, a dropped ±inf or NaN gives NaN.
// The mask is drawn from the generator of manual_seed (core/tensor.hpp), so manual_seed(s)
// reproduces it; the backward multiplies by the same, saved mask.
// Throws ValueError for an undefined x, or p outside [0, 1] or NaN.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace functional

// Dropout(p): dropout(x, p, is_training()). After train() (the default) it drops and scales;
// after eval() it is the identity. Throws ValueError for p outside [0, 1] or NaN.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) const { return functional::dropout(x, p_, is_training()); }
    double p() const { return p_; }

private:
    double p_;
};

}  // namespace xgrad::nn
