// core/detail/accumulate.hpp — what the backward pass (core/autograd.cpp) calls in
// core/accumulate.cpp, the one writer of .grad (internal; not for users).
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>

#include <xgrad/core/autograd.hpp>

namespace xgrad {
namespace xgrad_detail {
// Who is adding a gradient, for messages: "op 'embedding', input 0", or a plain description.
// Formatted only when a check fails (a string built per edge would cost every backward).
struct Source {
    const char* op;
    std::ptrdiff_t input = -1;  // -1: `op` is the whole description
};
}  // namespace xgrad_detail

// leaf.grad += g (dense or row-sparse), under the leaf's lock. Throws ValueError naming `op` and
// `source`, before any write, when g or the gradient held does not fit the leaf's current shape.
void accumulate_leaf(TensorImpl& leaf, Grad g, const char* op, const xgrad_detail::Source& source);

// Throws unless `g` is a gradient for a tensor of shape `shape` (rows in range, for row-sparse).
void check_new(const Grad& g, const Array::shape_type& shape, const char* op, const xgrad_detail::Source& source);

// A non-leaf's dL/d(output), summed over its consumers: sum += g; row-sparse g is scattered in.
void add_to_sum(std::optional<Array>& sum, Grad g, const Array::shape_type& shape);

// The lock under which `leaf`'s gradient is written: one of a fixed set, by the leaf's address.
std::mutex& leaf_lock(const TensorImpl& leaf);

// The numbers g holds: the dense array, or the (n, d...) rows of a row-sparse gradient.
const Array& grad_values(const Grad& g);

}  // namespace xgrad
