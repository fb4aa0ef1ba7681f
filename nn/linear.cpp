// nn/linear.cpp — Linear's parameters and initialisation; the op is functional::linear.
#include "nn/linear.hpp"

#include <cmath>
#include <cstdint>

namespace xgrad::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias)
    : in_(in_features), out_(out_features) {
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
