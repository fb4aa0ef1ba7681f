// core/ops.hpp — every differentiable op of the core: the one header a program includes.
//
// The declarations live in one header per topic, beside the .cpp that defines them: the op's
// forward and backward side by side, with the formula and the shapes above it. The library's own
// files include only the topic headers they use, so an op declared here (and not yet used by the
// library) recompiles only the programs and tests that include this file.
// Conventions:
//   * dims may be negative and count from the end, as in PyTorch;
//   * binary elementwise ops broadcast with NumPy/PyTorch rules, and each operand's
//     gradient is summed back to that operand's own shape (sum_to);
//   * every result is a fresh contiguous array; no op returns a view that aliases storage.
// Errors: ValueError (a std::invalid_argument) for bad shapes/dims, IndexError (a
// std::out_of_range) for out-of-range indices; each message names the op.
#pragma once

#include <xgrad/core/elementwise.hpp>  // add sub mul div neg, + - * /, pow exp log tanh relu sigmoid; sum_to
#include <xgrad/core/reduction.hpp>    // sum mean max argmax cumsum; sum_double
#include <xgrad/core/shape.hpp>        // reshape transpose permute concat stack; normalize_dim
#include <xgrad/core/matmul.hpp>       // matmul
#include <xgrad/core/softmax.hpp>      // softmax softmax_composed log_softmax
#include <xgrad/core/indexing.hpp>     // index_select one_hot check_ids
#include <xgrad/core/slicing.hpp>      // narrow split chunk
#include <xgrad/core/masking.hpp>      // masked_fill tril triu
#include <xgrad/core/comparison.hpp>   // eq ne lt le gt ge (0/1 masks), allclose, equal
#include <xgrad/core/math_ops.hpp>     // sqrt rsqrt var abs clamp clamp_min clamp_max minimum maximum
#include <xgrad/core/selection.hpp>    // where gather scatter_add topk sort argsort
#include <xgrad/core/random.hpp>       // multinomial (no gradient)
#include <xgrad/core/checkpoint.hpp>   // checkpoint (activation checkpointing)
#include <xgrad/core/profiler.hpp>     // OpScope, the first line of an op (README.md, "Adding an op")

namespace xgrad {

// ---- ops of your own (README.md, "Adding an op") ---------------------------------------------------
// Declare a new op here and define it in the .cpp of its topic (or a new core/ file listed in
// CMakeLists.txt); once library code calls it, move the declaration into the topic's header.

}  // namespace xgrad
