// distributed/detail/signature.hpp — what the ranks compare before they send (internal:
// collectives.cpp and ddp.cpp; the tests use it to play a rank built with another element type).
//
// A signature names the call, its element type and its shape, "all_reduce Sum of float32 (4, 3)":
// a program built with real = float and one built with real = double under one mpirun differ in
// it, so every rank refuses together instead of summing 4-byte and 8-byte numbers.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include <xgrad/core/tensor.hpp>
#include <xgrad/distributed/detail/backend.hpp>

namespace xgrad::nn {
class Module;
}

namespace xgrad::distributed::detail {

// The element type of this build's tensors (real): Float or Double.
constexpr backend::Number kReal = std::is_same_v<real, float> ? backend::Number::Float : backend::Number::Double;

// "float32" or "float64", as PyTorch names them.
const char* type_name(backend::Number type);

// "{call} of {type} {shape}", e.g. tensor_signature("broadcast from 0", Float, {2}) is
// "broadcast from 0 of float32 (2)".
std::string tensor_signature(const std::string& call, backend::Number type, const Shape& shape);

// Throws the same ValueError on every rank unless every rank passes the same signature, listing
// each rank's; then throws on every rank if `invalid` (part of the signature, so the same on all)
// names a bad argument. One all-gather of a 64-bit hash when the ranks agree.
void check_agree(const char* op, const std::string& signature, const std::string& invalid = "");

// What DistributedDataParallel's ranks must agree on, one line each: the element type
// ("elements float32"), every parameter (name, shape, "frozen"), every buffer, the bucket cap.
std::string model_text(const nn::Module& m, std::size_t bucket_bytes, backend::Number type);

}  // namespace xgrad::distributed::detail
