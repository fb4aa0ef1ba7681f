// nn/linear.cpp — Linear's parameters and initialisation; the op is functional::linear.
#include "nn/linear.hpp"

#include <cmath>
#include <cstdint>

namespace xgrad::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias)
    : in_(in_features), out_(out_features), has_bias_(with_bias) {
    check(in_ > 0 && out_ > 0, "Linear", "in_features and out_features must be positive; got ({}, {})", in_,
          out_);
    check(std::uint64_t(in_) <= SIZE_MAX / sizeof(real) / std::uint64_t(out_), "Linear",
          "a ({}, {}) weight is too large to address", out_, in_);
    // U(-k, k), k = 1/√in:  u ~ U[0, 1)  →  (2u - 1)·k
    const real k = real(1) / std::sqrt(static_cast<real>(in_));
    auto uniform = [k](Shape shape) {
        Tensor t = rand(shape);
        t.data() = (2 * t.data() - 1) * k;
        return t;
    };
    weight = register_parameter("weight", uniform({std::size_t(out_), std::size_t(in_)}));
    if (with_bias) bias = register_parameter("bias", uniform({std::size_t(out_)}));
}

}  // namespace xgrad::nn

namespace xgrad::nn {

// The public members are what forward reads; the registered tensors are what the optimizer
// steps and save() writes. They must be the same handles.
Tensor Linear::forward(const Tensor& x) const {
    check(weight.impl() == registered_parameter("weight").impl(), "Linear",
          "the member 'weight' is no longer the registered parameter (was it reassigned, as in "
          "`head->weight = emb->weight`?); the optimizer and state_dict() still hold the registered "
          "tensor, so this forward would read a tensor that is never trained. To share an "
          "Embedding's table use nn::tie_weights(head, table); to set values, assign to weight.data()");
    check(has_bias_ ? bias.impl() == registered_parameter("bias").impl() : !bias.defined(), "Linear",
          "the member 'bias' is no longer the registered parameter (was it reassigned?); the optimizer "
          "and state_dict() hold the registered one, so it would never be trained; to set values, "
          "assign to bias.data()");
    return functional::linear(x, weight, bias);
}

}  // namespace xgrad::nn
