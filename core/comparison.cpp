// core/comparison.cpp — comparisons: the element-wise eq ne lt le gt ge, and allclose / equal.
//
// An element-wise comparison gives a mask, a 0/1 Tensor of `real` (xgrad has no bool dtype):
//     Tensor pad = eq(ids_as_real, 0);                 // 1 where the input is padding
//     Tensor hits = sum(eq(pred, target));             // how many agree
// A mask is a constant: the step from a to 0/1 has derivative 0 wherever it exists, so no op here
// joins the graph. allclose and equal answer one bool, for tests and checks.
// Legend: a, b inputs broadcast to y's shape (NumPy/PyTorch rules); v a number.
#include <algorithm>
#include <cmath>
#include <functional>

#include <xtensor/xexception.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xvectorize.hpp>

#include <xgrad/core/comparison.hpp>
#include <xgrad/core/detail/op_helpers.hpp>

namespace xgrad {

// ---- eq ne lt le gt ge ------------------------------------------------------------------------------
// y[i] = Op(a[i], b[i]) ? 1 : 0       a, b broadcast to y's shape; b may be a number (y a's shape)
// Op is std::equal_to, not_equal_to, less, ...: C++'s float comparisons are IEEE's, as PyTorch's.
// ref: PyTorch docs, torch.eq / ne / lt / le / gt / ge (they return bool; xgrad returns 1/0 reals).
template <class Op, class B>
static Tensor compare_values(const Tensor& a, const B& b) {
    auto one_if = xt::vectorize([](real x, real y) { return Op{}(x, y) ? real(1) : real(0); });
    return from_array(Array(one_if(a.data(), b)));
}

template <class Op>
static Tensor compare(const Tensor& a, const Tensor& b, const char* op) {
    check_defined(a, op, "a");
    check_defined(b, op, "b");
    check_broadcastable(a, b, op);
    return compare_values<Op>(a, b.data());
}

template <class Op>
static Tensor compare(const Tensor& a, real v, const char* op) {
    check_defined(a, op, "a");
    return compare_values<Op>(a, v);
}

// IDs compare as int64 (exact past 2^24, where a float would round); the mask is a real Tensor.
template <class Op>
static Tensor compare(const IndexTensor& a, const IndexTensor& b, const char* op) {
    auto one_if = xt::vectorize([](std::int64_t x, std::int64_t y) { return Op{}(x, y) ? real(1) : real(0); });
    try {
        return from_array(Array(one_if(a.data(), b.data())));
    } catch (const xt::broadcast_error&) {
        throw ValueError(fmt::format("{}: shapes {} and {} cannot be broadcast together", op,
                                     shape_str(a.shape()), shape_str(b.shape())));
    }
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare<std::equal_to<real>>(a, b, "eq"); }
Tensor eq(const IndexTensor& a, const IndexTensor& b) { return compare<std::equal_to<std::int64_t>>(a, b, "eq"); }
Tensor ne(const IndexTensor& a, const IndexTensor& b) {
    return compare<std::not_equal_to<std::int64_t>>(a, b, "ne");
}
Tensor ne(const Tensor& a, const Tensor& b) { return compare<std::not_equal_to<real>>(a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare<std::less<real>>(a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare<std::less_equal<real>>(a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare<std::greater<real>>(a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare<std::greater_equal<real>>(a, b, "ge"); }
Tensor eq(const Tensor& a, real v) { return compare<std::equal_to<real>>(a, v, "eq"); }
Tensor ne(const Tensor& a, real v) { return compare<std::not_equal_to<real>>(a, v, "ne"); }
Tensor lt(const Tensor& a, real v) { return compare<std::less<real>>(a, v, "lt"); }
Tensor le(const Tensor& a, real v) { return compare<std::less_equal<real>>(a, v, "le"); }
Tensor gt(const Tensor& a, real v) { return compare<std::greater<real>>(a, v, "gt"); }
Tensor ge(const Tensor& a, real v) { return compare<std::greater_equal<real>>(a, v, "ge"); }

// ---- allclose --------------------------------------------------------------------------------------
// close(x, y) = x == y  or  |x - y| <= atol + rtol·|y| with |x - y| finite   (y from b, the reference)
// allclose    = close at every element of the broadcast shape
// x == y comes first so that inf is close to inf; a finite tolerance never covers an infinite
// difference, so ±inf is close to nothing else. NaN fails both tests (unless equal_nan and both NaN).
// Computed in `real`, as PyTorch computes in the tensors' dtype. ref: PyTorch docs, torch.isclose.
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
    check_defined(a, "allclose", "a");
    check_defined(b, "allclose", "b");
    check_broadcastable(a, b, "allclose");
    check(rtol >= 0 && atol >= 0, "allclose", "rtol and atol must be >= 0, got rtol={} and atol={} "
          "(shapes {} and {})", rtol, atol, shape_str(a.shape()), shape_str(b.shape()));
    if (a.numel() == 0 || b.numel() == 0) return true;  // an empty broadcast shape: nothing to compare
    const real rt = static_cast<real>(rtol), at = static_cast<real>(atol);
    auto close = xt::vectorize([rt, at, equal_nan](real x, real y) {
        if (x == y || (equal_nan && std::isnan(x) && std::isnan(y))) return true;
        const real err = std::abs(x - y);
        return std::isfinite(err) && err <= at + rt * std::abs(y);
    });
    return xt::all(close(a.data(), b.data()));
}

// ---- equal -----------------------------------------------------------------------------------------
// equal = same shape and a[i] == b[i] at every i (so a tensor holding NaN is not equal to itself).
// ref: PyTorch docs, torch.equal.
bool equal(const Tensor& a, const Tensor& b) {
    check_defined(a, "equal", "a");
    check_defined(b, "equal", "b");
    return a.shape() == b.shape() && std::equal(a.data().begin(), a.data().end(), b.data().begin());
}

bool equal(const IndexTensor& a, const IndexTensor& b) {
    return a.shape() == b.shape() && std::equal(a.data().begin(), a.data().end(), b.data().begin());
}

}  // namespace xgrad
