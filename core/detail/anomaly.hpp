// core/detail/anomaly.hpp — the check that anomaly mode (core/anomaly.cpp) runs on every forward
// output and every gradient (internal; not for users).
#pragma once

#include <cstddef>
#include <string>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// Throws ValueError naming `op` if `a` holds a NaN or ±inf. With `inputs` (n of them), a ±inf is
// let through when an input already held one: the op passed it on (a -inf attention mask).
void check_finite(const Array& a, const std::string& op, const char* what, const Tensor* inputs = nullptr,
                  std::size_t n = 0);

}  // namespace xgrad
