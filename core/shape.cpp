// core/shape.cpp — ops that move values without computing: reshape/view, permute/transpose,
// concat, stack. Each backward moves g back the same way.
//
// Legend: x the input; y the output; g = dL/dy. Every result owns a fresh copy (no views).
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include <xgrad/core/detail/op_helpers.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/detail/permute.hpp>

namespace xgrad {

std::size_t normalize_dim(int dim, std::size_t ndim, const char* op) {
    const int n = static_cast<int>(ndim);
    check(dim >= -n && dim < n, op, "dim {} out of range [{}, {}) for a {}-d tensor", dim, -n, n, n);
    return static_cast<std::size_t>(dim < 0 ? dim + n : dim);
}

// ---- reshape / view ------------------------------------------------------------------------------
// forward : y = x with a new shape of the same numel (one entry may be -1: inferred)
// backward: dL/dx = g reshaped back to x's shape
// Unlike PyTorch's view, the result owns a copy of the data (xgrad never aliases storage).
Tensor reshape(const Tensor& x, const Dims& dims) {
    const profiler::OpScope scope("reshape", x);
    const std::size_t numel = x.numel();
    ArrayShape shape(dims.size(), 1);  // an inferred (-1) size stays 1 until it is known
    int infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1) {
            check(infer < 0, "reshape", "only one dim can be -1 in {}", lazy_shape(dims));
            infer = static_cast<int>(i);
        } else {
            check(dims[i] >= 0, "reshape", "invalid size {} in {}", dims[i], lazy_shape(dims));
            shape[i] = static_cast<std::size_t>(dims[i]);
        }
    }
    std::size_t known = checked_numel(shape, "reshape");  // product of the given sizes
    if (infer >= 0) {
        check(known > 0 && numel % known == 0, "reshape", "cannot infer -1 in {} for {} elements of shape {}",
              lazy_shape(dims), numel, lazy_shape(x.shape()));
        shape[static_cast<std::size_t>(infer)] = numel / known;
        known *= shape[static_cast<std::size_t>(infer)];
    }
    check(known == numel, "reshape", "cannot reshape {} ({} elements) to {}", lazy_shape(x.shape()),
          numel, lazy_shape(dims));
    Array y = x.data();
    y.reshape(shape);
    // xs unsigned: xtensor's reshape to a signed shape divides by the product of the sizes (0 when empty)
    return make_result(std::move(y), "reshape", {x}, [xs = array_shape(x.data())](const Array& g, const Array&) {
        Array gx = g;
        gx.reshape(xs);
        return make_grads(std::move(gx));
    });
}

// ---- permute / transpose -------------------------------------------------------------------------
// forward : y.shape[i] = x.shape[perm[i]],  y[..i..] = x[..perm⁻¹..]
// backward: dL/dx = permute(g, perm⁻¹)       where perm⁻¹[perm[i]] = i
Tensor permute(const Tensor& x, const std::vector<int>& dims) {
    const profiler::OpScope scope("permute", x);
    const std::size_t n = x.dim();
    check(dims.size() == n, "permute", "got {} dims {} for a {}-d tensor of shape {}", dims.size(),
          shape_str(dims), n, shape_str(x.shape()));
    std::vector<std::size_t> perm(n), inverse(n, n);
    for (std::size_t i = 0; i < n; ++i) {
        perm[i] = normalize_dim(dims[i], n, "permute");
        check(inverse[perm[i]] == n, "permute", "dims {} repeat dim {}", shape_str(dims), perm[i]);
        inverse[perm[i]] = i;
    }
    Array y = permute_array(x.data(), perm);  // core/permute.cpp: row copies, not xt::transpose
    return make_result(std::move(y), "permute", {x}, [inverse](const Array& g, const Array&) {
        return make_grads(permute_array(g, inverse));
    });
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
    const std::size_t n = x.dim();
    const std::size_t a = normalize_dim(dim0, n, "transpose"), b = normalize_dim(dim1, n, "transpose");
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[a], perm[b]);
    return permute(x, perm);
}

// ---- concat --------------------------------------------------------------------------------------
// forward : y = [x_0 | x_1 | ... ] along dim   all shapes equal except along dim
// backward: dL/dx_k = the slice of g that x_k filled
Tensor concat(const std::vector<Tensor>& xs, int dim) {
    const profiler::OpScope scope("concat", xs);
    check(!xs.empty(), "concat", "needs at least one tensor");
    const ArrayShape first = array_shape(xs[0].data());
    const std::size_t d = normalize_dim(dim, first.size(), "concat");
    ArrayShape ys = first;
    ys[d] = 0;
    for (const auto& t : xs) {
        ArrayShape s = array_shape(t.data());
        bool same = s.size() == first.size();
        for (std::size_t i = 0; same && i < s.size(); ++i) same = (i == d || s[i] == first[i]);
        check(same, "concat", "shape {} does not match {} outside dim {}", shape_str(s),
              shape_str(first), d);
        ys[d] += s[d];
    }
    const DimSplit out = split_at(ys, d);
    std::vector<std::size_t> widths;  // each input's row length: n_k · inner
    Array y(ys);
    std::size_t offset = 0;
    for (const auto& t : xs) {
        const std::size_t w = t.shape()[d] * out.inner;
        for (std::size_t o = 0; o < out.outer; ++o)
            std::copy_n(t.data().data() + o * w, w, y.data() + o * out.n * out.inner + offset);
        widths.push_back(w);
        offset += w;
    }
    return make_result(std::move(y), "concat", xs, [out, widths, xs_shapes = [&] {
        std::vector<ArrayShape> v;
        for (const auto& t : xs) v.push_back(array_shape(t.data()));
        return v;
    }()](const Array& g, const Array&) {
        Grads grads;
        std::size_t off = 0;
        for (std::size_t k = 0; k < widths.size(); ++k) {
            Array gk(xs_shapes[k]);
            for (std::size_t o = 0; o < out.outer; ++o)
                std::copy_n(g.data() + o * out.n * out.inner + off, widths[k], gk.data() + o * widths[k]);
            grads.push_back(std::move(gk));
            off += widths[k];
        }
        return grads;
    });
}

// ---- stack ---------------------------------------------------------------------------------------
// forward : y = concat([x_0 with a 1 inserted at dim, x_1 ..., ...], dim)   x_k: S, y: S with K at dim
// backward: dL/dx_k = the slice k of g along dim, through concat's and reshape's backward
// Composed from reshape and concat, so it needs no backward of its own.
// ref: PyTorch docs, torch.stack ("concatenates a sequence of tensors along a new dimension")
Tensor stack(const std::vector<Tensor>& xs, int dim) {
    check(!xs.empty(), "stack", "needs at least one tensor");
    for (std::size_t k = 0; k < xs.size(); ++k) check(xs[k].defined(), "stack", "tensor {} is undefined", k);
    const Shape first = xs[0].shape();
    const int n = static_cast<int>(first.size());
    check(dim >= -(n + 1) && dim <= n, "stack", "dim {} out of range [{}, {}] for {}-d tensors", dim, -(n + 1), n, n);
    const auto at = static_cast<std::size_t>(dim < 0 ? dim + n + 1 : dim);
    Dims unsqueezed(first.begin(), first.end());
    unsqueezed.insert(unsqueezed.begin() + static_cast<std::ptrdiff_t>(at), 1);
    std::vector<Tensor> pieces;
    for (std::size_t k = 0; k < xs.size(); ++k) {
        check(xs[k].shape() == first, "stack", "tensor {} has shape {}, tensor 0 has {}; all must be equal", k,
              shape_str(xs[k].shape()), shape_str(first));
        pieces.push_back(reshape(xs[k], unsqueezed));
    }
    return concat(pieces, static_cast<int>(at));
}

}  // namespace xgrad
