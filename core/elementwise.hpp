// core/elementwise.hpp — the elementwise ops (core/elementwise.cpp): binary ops that broadcast, their
// operators, and the pointwise functions. Part of core/ops.hpp.
#pragma once

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- helper for writing ops --------------------------------------------------------------------
// Sums a broadcast gradient back to `shape` (the reverse of broadcasting): leading extra
// dims are summed away, and dims where `shape` has 1 are summed with keepdim. Returns `grad`
// itself (moved, not copied) when it already has `shape`.
Array sum_to(Array grad, const ArrayShape& shape);

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

}  // namespace xgrad
