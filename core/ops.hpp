// core/ops.hpp — every differentiable op of the core, as free functions.
//
// Each op is defined in core/ops.cpp with its forward and its backward side by side, the
// formula and the shapes in a comment above it. Conventions:
//   * dims may be negative and count from the end, as in PyTorch;
//   * binary elementwise ops broadcast with NumPy/PyTorch rules, and each operand's
//     gradient is summed back to that operand's own shape (sum_to);
//   * every result is a fresh contiguous array; no op returns a view that aliases storage.
// Errors: ValueError (a std::invalid_argument) for bad shapes/dims, IndexError (a
// std::out_of_range) for out-of-range indices; each message names the op.
#pragma once

#include <vector>

#include "core/autograd.hpp"
#include "core/tensor.hpp"

namespace xgrad {

// ---- helpers for writing ops ------------------------------------------------------------------
// Maps dim in [-n, n) to [0, n); throws ValueError naming `op` otherwise.
std::size_t normalize_dim(int dim, std::size_t ndim, const char* op);
// Sums a broadcast gradient back to `shape` (the reverse of broadcasting): leading extra
// dims are summed away, and dims where `shape` has 1 are summed with keepdim. Returns `grad`
// itself (moved, not copied) when it already has `shape`.
Array sum_to(Array grad, const Shape& shape);
// Σ of n contiguous values, accumulated in double with eight interleaved partial sums (so the
// additions pipeline instead of each waiting for the one before). Used by sum() and by losses
// that sum rows (nn::functional::cross_entropy).
double sum_double(const real* p, std::size_t n);

// ---- elementwise, broadcasting ------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor add(const Tensor& a, real s);
Tensor mul(const Tensor& a, real s);
Tensor rsub(real s, const Tensor& a);  // s - a
Tensor rdiv(real s, const Tensor& a);  // s / a

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, real s) { return add(a, s); }
inline Tensor operator+(real s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, real s) { return add(a, -s); }
inline Tensor operator-(real s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(const Tensor& a, real s) { return mul(a, s); }
inline Tensor operator*(real s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, real s) { return mul(a, 1 / s); }
inline Tensor operator/(real s, const Tensor& a) { return rdiv(s, a); }

// ---- pointwise ------------------------------------------------------------------------------------
Tensor pow(const Tensor& x, real exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);

// ---- reductions -----------------------------------------------------------------------------------
Tensor sum(const Tensor& x);                               // () 
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
Tensor max(const Tensor& x);                               // () 
Tensor max(const Tensor& x, int dim, bool keepdim = false);
IndexTensor argmax(const Tensor& x, int dim, bool keepdim = false);

// ---- shape -----------------------------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Dims& shape);
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor concat(const std::vector<Tensor>& xs, int dim);

// ---- linear algebra -----------------------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- softmax family ------------------------------------------------------------------------------
// softmax along dim (x any shape, y the same shape), fused: one pass per row forward, and a
// backward from the saved y (core/softmax.cpp). softmax_composed is the same function built
// from max, sub, exp, sum and div, the test oracle. log_softmax is composed.
Tensor softmax(const Tensor& x, int dim);
Tensor softmax_composed(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);

// ---- indexing -------------------------------------------------------------------------------------
// Throws IndexError naming `op`, the position (as a multi-index into `ids`) and the value of
// the first ID outside [0, limit). Never clamps or wraps: negative IDs are errors.
void check_ids(const IndexTensor& ids, std::int64_t limit, const char* op);
Tensor index_select(const Tensor& src, int dim, const IndexTensor& index);
Tensor one_hot(const IndexTensor& ids, std::size_t num_classes);

}  // namespace xgrad
