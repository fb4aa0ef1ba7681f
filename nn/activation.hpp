// nn/activation.hpp — activation functions: GELU's and SiLU's functional forms, and the
// activations as modules (no parameters), for nn::Sequential.
//   Tanh: y = tanh(x)   ReLU: y = max(x, 0)   GELU: y = x·Φ(x)   SiLU: y = x·σ(x)   any shape → same shape
// (relu, tanh and sigmoid are core ops, core/ops.hpp; nn/functional.hpp re-exports them.)
#pragma once

#include <string>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

namespace functional {

// GELU (Hendrycks & Gimpel 2016), elementwise on any shape, dtype real.
//   approximate = "none": y = x · Φ(x), Φ the standard normal CDF, Φ(x) = ½ erfc(-x/√2)
//   approximate = "tanh": y = ½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))
// The float "none" form is within 1e-6 of double std::erfc on [-10, 10] (tests/nn/test_activation.cpp).
// ±inf give the limits: y = +inf or 0, dy/dx = 1 or 0 (PyTorch gives nan at -inf). NaN gives NaN.
// Throws ValueError for an undefined x or an approximate other than "none" or "tanh".
// ref: PyTorch docs, torch.nn.functional.gelu / torch.nn.GELU
Tensor gelu(const Tensor& x, const std::string& approximate = "none");

// SiLU, or swish (Elfwing, Uchibe & Doya 2018; Hendrycks & Gimpel 2016), elementwise on any
// shape, dtype real:  y = x · σ(x),  σ(x) = 1 / (1 + e^(-x)),  dy/dx = σ(x) · (1 + x · (1 - σ(x))).
// Stable for any x: e^(-|x|) never overflows, so silu(100) = 100 and silu(-100) = -3.7e-42 (-0 in
// float, whose exp underflows to 0 below -87.3). ±inf give the limits: y = +inf or 0, dy/dx = 1
// or 0 (PyTorch gives nan at -inf). NaN gives NaN. Throws ValueError for an undefined x.
// ref: PyTorch docs, torch.nn.functional.silu / torch.nn.SiLU
Tensor silu(const Tensor& x);

}  // namespace functional

struct Tanh : Module {
    Tensor forward(const Tensor& x) const { return xgrad::tanh(x); }
};
struct ReLU : Module {
    Tensor forward(const Tensor& x) const { return xgrad::relu(x); }
};
struct SiLU : Module {
    Tensor forward(const Tensor& x) const { return functional::silu(x); }
};
// GELU(approximate): "none" (exact, PyTorch's default) or "tanh"; throws ValueError otherwise.
class GELU : public Module {
public:
    explicit GELU(std::string approximate = "none");
    Tensor forward(const Tensor& x) const { return functional::gelu(x, approximate_); }
    const std::string& approximate() const { return approximate_; }

private:
    std::string approximate_;
};

}  // namespace xgrad::nn
