// core/ops.hpp — every differentiable op of the core, as free functions.
//
// Each op is defined in the core/ file its section names, with its forward and its backward side
// by side and the formula and the shapes in a comment above it. To add an op, declare it here
// and define it in the file of its topic (or a new one listed in CMakeLists.txt). Conventions:
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

// ---- helpers for writing ops (normalize_dim: core/shape.cpp; sum_to: core/elementwise.cpp) ------
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

// ---- elementwise, broadcasting (core/elementwise.cpp) ---------------------------------------------
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

// ---- pointwise (core/elementwise.cpp) -------------------------------------------------------------
Tensor pow(const Tensor& x, real exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);

// ---- reductions (core/reduction.cpp; sum_double too) ----------------------------------------------
Tensor sum(const Tensor& x);                               // () 
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
Tensor max(const Tensor& x);                               // () 
Tensor max(const Tensor& x, int dim, bool keepdim = false);
IndexTensor argmax(const Tensor& x, int dim, bool keepdim = false);

// ---- shape (core/shape.cpp) -----------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Dims& shape);
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor concat(const std::vector<Tensor>& xs, int dim);

// ---- linear algebra (core/matmul.cpp) -------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- softmax family (core/softmax.cpp) ------------------------------------------------------------
// softmax along dim (x any shape, y the same shape), fused: one pass per row forward, and a
// backward from the saved y (core/softmax.cpp). softmax_composed is the same function built
// from max, sub, exp, sum and div, the test oracle. log_softmax is composed.
Tensor softmax(const Tensor& x, int dim);
Tensor softmax_composed(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);

// ---- indexing (core/indexing.cpp) -----------------------------------------------------------------
// Throws IndexError naming `op`, the position (as a multi-index into `ids`) and the value of
// the first ID outside [0, limit). Never clamps or wraps: negative IDs are errors.
void check_ids(const IndexTensor& ids, std::int64_t limit, const char* op);
Tensor index_select(const Tensor& src, int dim, const IndexTensor& index);
Tensor one_hot(const IndexTensor& ids, std::size_t num_classes);

// ---- slicing (core/slicing.cpp) -------------------------------------------------------------------
// Pieces of x along one dim, each a fresh array; the gradient of a piece lands back in its slice
// of dL/dx (zeros elsewhere). dim may be negative. ref: PyTorch docs, torch.narrow/split/chunk.
// narrow: x[..., start : start + length, ...] along dim. start may be negative and then counts
//   from the end (start + size), as in PyTorch. Throws ValueError for a 0-d x, a negative length,
//   or start + length past the end; IndexError for start outside [-size, size].
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);
// split: pieces of split_size along dim; the last one is smaller when split_size does not
//   divide the size. Throws ValueError for split_size < 0, or 0 on a non-empty dim.
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, int dim = 0);
// chunk: split(x, ceil(size / chunks), dim), so it may return FEWER than `chunks` pieces
//   (size 6 in 4 chunks gives 2, 2, 2), exactly like torch.chunk. Throws ValueError for chunks < 1.
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim = 0);

// ---- masking (core/masking.cpp) -------------------------------------------------------------------
// masked_fill: y = value where mask != 0, else x. mask is any Tensor whose shape broadcasts to
//   x's shape (PyTorch's bool True = any nonzero here; NaN counts as nonzero); y has x's shape;
//   value may be ±inf. dL/dx = grad_out with 0 at filled positions; mask gets no gradient.
//   Throws ValueError when mask does not broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, real value);
// tril / triu on the last two dims (rows i, columns j), any leading batch dims: tril keeps
//   j - i <= k, triu keeps j - i >= k, the rest is 0. Differentiable (the gradient is masked
//   the same way). Causal mask: triu(ones({T, T}), 1). Throws ValueError for fewer than 2 dims.
Tensor tril(const Tensor& x, std::int64_t k = 0);
Tensor triu(const Tensor& x, std::int64_t k = 0);
// eq / ne: 1 where a == v (a != v), else 0; a's shape; no gradient (a constant, like a mask).
//   NaN == NaN is false, as in IEEE and PyTorch.
Tensor eq(const Tensor& a, real v);
Tensor ne(const Tensor& a, real v);

// ---- more math (core/math_ops.cpp) -----------------------------------------------------------------
Tensor sqrt(const Tensor& x);   // √x;  x < 0 gives NaN, and dL/dx = inf at x = 0 (as PyTorch)
Tensor rsqrt(const Tensor& x);  // 1/√x; x = 0 gives inf
// var along dim: Σ(x - mean)² / (N - 1) when unbiased (Bessel), / N otherwise, summed in double.
//   As in PyTorch 1.13, a divisor of 0 (N = 1 unbiased, or N = 0) gives NaN, and so does its
//   gradient. Shape: x's shape without dim (with a 1 there if keepdim).
Tensor var(const Tensor& x, int dim, bool keepdim = false, bool unbiased = true);

}  // namespace xgrad
