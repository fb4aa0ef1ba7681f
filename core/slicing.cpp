// core/slicing.cpp — taking pieces of a tensor along one dim: narrow, split, chunk.
//
// Attention cuts c_attn's (B, T, 3d) output into q, k, v (B, T, d) with these. narrow does the
// work; split and chunk are loops of narrows, so autograd sums the pieces' zero-padded gradients
// (one x-sized array per piece: fine for a few pieces, quadratic for split(x, 1) on a long dim).
//
// Shape legend: x the input, `size` = x.shape[dim]; y one piece; g = dL/dy. Pieces are fresh
// arrays, not views as in PyTorch (memory sharing differs, values and gradients do not).
#include <algorithm>
#include <cstring>
#include <limits>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/slicing.hpp>

namespace xgrad {

// ---- narrow --------------------------------------------------------------------------------------
// forward : y = x[..., start : start + length, ...]     (the slice along dim)
//           x (..., size, ...)  ->  y (..., length, ...)
// backward: dL/dx = g placed into that slice, 0 elsewhere     x's shape
// Viewed as (outer, size, inner) around dim, the slice is `outer` runs of length·inner values.
// A negative start counts from the end, as in PyTorch.
// ref: PyTorch docs, torch.narrow.
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length) {
    const profiler::OpScope scope("narrow", x);
    const ArrayShape xs = array_shape(x.data());
    check(!xs.empty(), "narrow", "cannot be applied to a 0-d tensor");
    const std::size_t d = normalize_dim(dim, xs.size(), "narrow");
    const auto size = static_cast<std::int64_t>(xs[d]);
    check_index(start >= -size && start <= size, "narrow", "start {} out of range [{}, {}] for dim {} of size {}",
                start, -size, size, d, size);
    if (start < 0) start += size;
    check(length >= 0, "narrow", "length {} must be >= 0", length);
    check(length <= size - start, "narrow", "start ({}) + length ({}) exceeds dim {} of size {}: length must be in [0, {}]",
          start, length, d, size, size - start);

    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < d; ++i) outer *= xs[i];
    for (std::size_t i = d + 1; i < xs.size(); ++i) inner *= xs[i];
    const std::size_t run = static_cast<std::size_t>(length) * inner;                 // values per run in y
    const std::size_t x_row = xs[d] * inner;                                          // values per run in x
    const std::size_t offset = static_cast<std::size_t>(start) * inner;               // where the slice starts

    ArrayShape ys = xs;
    ys[d] = static_cast<std::size_t>(length);
    Array y(ys);
    for (std::size_t o = 0; o < outer; ++o)
        std::copy_n(x.data().data() + o * x_row + offset, run, y.data() + o * run);

    return make_result(std::move(y), "narrow", {x}, [xs, outer, run, x_row, offset](const Array& g, const Array&) {
        // in the forward pass this was: y[o] = x[o, start : start + length]; so dL/dx there = g[o]
        // (each value of gx written once: the zeros around the slice, then the slice)
        Array gx(xs);
        for (std::size_t o = 0; o < outer; ++o) {
            real* row = gx.data() + o * x_row;
            std::fill(row, row + offset, real(0));
            std::copy_n(g.data() + o * run, run, row + offset);
            std::fill(row + offset + run, row + x_row, real(0));
        }
        return make_grads(std::move(gx));
    });
}

// ---- split ---------------------------------------------------------------------------------------
// forward : pieces narrow(x, dim, s·split_size, min(split_size, size - s·split_size)) for
//           s < ceil(size / split_size); one empty piece when size is 0 (as PyTorch).
// backward: through narrow: dL/dx = Σ over pieces of each piece's gradient in its slice.
// ref: PyTorch docs, torch.split (the int split_size form).
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, int dim) {
    check(x.dim() > 0, "split", "cannot be applied to a 0-d tensor");
    const std::size_t d = normalize_dim(dim, x.dim(), "split");
    const auto size = static_cast<std::int64_t>(x.shape()[d]);
    check(split_size >= 0, "split", "split_size {} must be >= 0", split_size);
    check(split_size > 0 || size == 0, "split",
          "split_size can be 0 only when dim {} has size 0, but its size is {}", d, size);
    std::vector<Tensor> pieces;
    if (size == 0) {
        pieces.push_back(narrow(x, dim, 0, 0));
        return pieces;
    }
    for (std::int64_t start = 0; start < size; start += std::min(split_size, size - start))
        pieces.push_back(narrow(x, dim, start, std::min(split_size, size - start)));
    return pieces;
}

// ---- chunk ---------------------------------------------------------------------------------------
// forward : split(x, ceil(size / chunks), dim): possibly fewer pieces (6 in 4 chunks: 3 of 2), as
//           torch.chunk; a dim of size 0 gives `chunks` empty pieces.
// backward: through narrow.
// ref: PyTorch docs, torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim) {
    check(chunks > 0, "chunk", "chunks must be > 0, got {}", chunks);
    check(x.dim() > 0, "chunk", "cannot be applied to a 0-d tensor");
    const std::size_t d = normalize_dim(dim, x.dim(), "chunk");
    const auto size = static_cast<std::int64_t>(x.shape()[d]);
    if (size == 0) {
        std::vector<Tensor> pieces;
        for (std::int64_t c = 0; c < chunks; ++c) pieces.push_back(narrow(x, dim, 0, 0));
        return pieces;
    }
    const std::int64_t split_size = size / chunks + (size % chunks != 0);  // ceil, without overflow
    return split(x, split_size, dim);
}

}  // namespace xgrad
