// core/selection.cpp — choosing elements: where (by a mask), gather and scatter_add (by an index
// along a dim), topk, sort and argsort (by order along a dim).
//
// Legend: x, input the source; out the result; g = dL/dout. "Along dim" views a tensor as
// (outer, n, inner) (DimSplit, core/detail/op_helpers.hpp); c is a multi-index (a position).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <xtensor/xoperation.hpp>

#include <xgrad/core/detail/op_helpers.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/indexing.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/selection.hpp>
#include <xgrad/core/shape.hpp>

namespace xgrad {

// ==== where ==========================================================================================

// ---- where -----------------------------------------------------------------------------------------
// forward : out = cond ? x : y                      cond, x, y broadcast to out's shape
// backward: dL/dx = sum_to(g where cond = 1, else 0,  x.shape)
//           dL/dy = sum_to(g where cond = 0, else 0,  y.shape)     (cond: a constant, no gradient)
// Written with a selection, not g·cond: g·0 would turn an infinite g into NaN.
// ref: PyTorch docs, torch.where; derivatives.yaml, where: grad * condition / grad * ~condition
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
    const profiler::OpScope scope("where", cond, x, y);
    check_broadcastable(cond, x, "where");
    check_broadcastable(cond, y, "where");
    check_broadcastable(x, y, "where");  // pairwise broadcastable sizes agree at every dim
    const Array& C = cond.data();
    for (std::size_t i = 0; i < C.size(); ++i)
        check(C.data()[i] == 0 || C.data()[i] == 1, "where", "cond must be a 0/1 mask; got {} at flat position {} of shape {}",
              C.data()[i], i, lazy_shape(C.shape()));
    Array out = xt::where(xt::equal(C, real(1)), x.data(), y.data());
    return make_result(std::move(out), "where", {cond, x, y},
                       [cond, sx = array_shape(x.data()), sy = array_shape(y.data())](const Array& g, const Array&) {
                           const Array& C = cond.data();
                           Grads grads(3);  // grads[0], cond's, stays empty
                           grads[1] = sum_to(Array(xt::where(xt::equal(C, real(1)), g, real(0))), sx);
                           grads[2] = sum_to(Array(xt::where(xt::equal(C, real(1)), real(0), g)), sy);
                           return grads;
                       });
}

// ==== gather / scatter_add ===========================================================================

// A 0-d tensor is read as one element, shape (1,), so that it has a dim 0.
static ArrayShape as_lines(const ArrayShape& shape) { return shape.empty() ? ArrayShape{1} : shape; }

// Row-major strides: stride[d] = Π_{e > d} shape[e].
static std::vector<std::size_t> row_major_strides(const ArrayShape& shape) {
    std::vector<std::size_t> strides(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    return strides;
}

// Calls visit(p, at_index, at_same) for every position c of `index` (p its flat number): at_index is
// the flat offset in `indexed` (a shape) of c with coordinate dim replaced by index[c], at_same the
// flat offset of c itself in `same` (a shape at least index's). The one walk gather and scatter_add
// share: gather reads at at_index, scatter_add adds there.
template <class Visit>
static void walk_index(const IndexArray& index, std::size_t dim, const ArrayShape& indexed, const ArrayShape& same,
                       Visit visit) {
    const ArrayShape is = as_lines(array_shape(index));
    const std::vector<std::size_t> to = row_major_strides(as_lines(indexed)), ts = row_major_strides(as_lines(same));
    std::vector<std::size_t> c(is.size(), 0);
    for (std::size_t p = 0; p < index.size(); ++p) {
        std::size_t at_index = 0, at_same = 0;
        for (std::size_t d = 0; d < c.size(); ++d) {
            at_index += (d == dim ? static_cast<std::size_t>(index.data()[p]) : c[d]) * to[d];
            at_same += c[d] * ts[d];
        }
        visit(p, at_index, at_same);
        for (std::size_t d = c.size(); d-- > 0;) {  // the next position, row-major
            if (++c[d] < is[d]) break;
            c[d] = 0;
        }
    }
}

// torch.gather's and scatter_add's shape rule: `index` has the number of dims of `other`, and
// index.size(d) <= other.size(d) for every d (every d except dim when skip_dim).
static void check_index_fits(const IndexTensor& index, const ArrayShape& other, const char* other_name, std::size_t dim,
                             bool skip_dim, const char* op) {
    const ArrayShape is = array_shape(index.data());
    check(is.size() == other.size(), op, "index has {} dims, {} has {}: they must be equal (index {}, {} {})", is.size(),
          other_name, other.size(), shape_str(is), other_name, shape_str(other));
    for (std::size_t d = 0; d < is.size(); ++d)
        check((skip_dim && d == dim) || is[d] <= other[d], op, "index {} is larger than {} {} at dim {}{}", shape_str(is),
              other_name, shape_str(other), d, skip_dim ? " (only dim may be larger)" : "");
}

// ---- gather ----------------------------------------------------------------------------------------
// forward : out[c] = input[c with c_dim → index[c]]       out: index's shape
//           e.g. dim 1 of a 2-d input: out[i][j] = input[i][index[i][j]]
// backward: dL/dinput[c with c_dim → index[c]] += g[c]    a scatter-add; repeated indices sum
// ref: PyTorch docs, torch.gather; derivatives.yaml, gather_backward (a scatter_add of grad)
Tensor gather(const Tensor& input, int dim, const IndexTensor& index) {
    const profiler::OpScope scope("gather", input);
    const ArrayShape xs = array_shape(input.data());
    const std::size_t d = normalize_dim(dim, as_lines(xs).size(), "gather");
    check_index_fits(index, xs, "input", d, /*skip_dim=*/true, "gather");
    check_ids(index, static_cast<std::int64_t>(as_lines(xs)[d]), "gather");
    const ArrayShape is = array_shape(index.data());
    Array out(is);
    walk_index(index.data(), d, xs, is, [&](std::size_t p, std::size_t at, std::size_t) {
        out.data()[p] = input.data().data()[at];
    });
    return make_result(std::move(out), "gather", {input}, [xs, is, d, index](const Array& g, const Array&) {
        Array gx = xt::zeros<real>(xs);
        walk_index(index.data(), d, xs, is, [&](std::size_t p, std::size_t at, std::size_t) { gx.data()[at] += g.data()[p]; });
        return make_grads(std::move(gx));
    });
}

// ---- scatter_add -----------------------------------------------------------------------------------
// forward : out = input;  out[c with c_dim → index[c]] += src[c]   for every position c of index
// backward: dL/dinput = g                                           (out is input plus something)
//           dL/dsrc[c] = g[c with c_dim → index[c]]                 gather(g, dim, index); 0 at
//           positions of src outside index's shape (they were not read)
// ref: PyTorch docs, Tensor.scatter_add_; derivatives.yaml, scatter_add: src: grad.gather(dim, index)
Tensor scatter_add(const Tensor& input, int dim, const IndexTensor& index, const Tensor& src) {
    const profiler::OpScope scope("scatter_add", input, src);
    const ArrayShape xs = array_shape(input.data()), ss = array_shape(src.data());
    const std::size_t d = normalize_dim(dim, as_lines(xs).size(), "scatter_add");
    check_index_fits(index, xs, "input", d, /*skip_dim=*/true, "scatter_add");
    check_index_fits(index, ss, "src", d, /*skip_dim=*/false, "scatter_add");
    check_ids(index, static_cast<std::int64_t>(as_lines(xs)[d]), "scatter_add");
    Array out = input.data();
    walk_index(index.data(), d, xs, ss, [&](std::size_t, std::size_t at, std::size_t from) {
        out.data()[at] += src.data().data()[from];
    });
    return make_result(std::move(out), "scatter_add", {input, src}, [xs, ss, d, index](const Array& g, const Array&) {
        Array gsrc = xt::zeros<real>(ss);
        walk_index(index.data(), d, xs, ss, [&](std::size_t, std::size_t at, std::size_t to) { gsrc.data()[to] = g.data()[at]; });
        return make_grads(g, std::move(gsrc));
    });
}

// ==== topk / sort / argsort ==========================================================================
// Each line (o, :, j) is ordered by a stable comparison in which NaN is above every number, as in
// PyTorch; the values are then gather(x, dim, indices), so the backward is gather's: g goes back
// to the position it was taken from.

// Whether a comes before b: a < b ascending, a > b descending, NaN the largest; equal values (two
// NaN too) keep their order (the caller breaks ties by position).
static bool comes_before(real a, real b, bool descending) {
    if (descending) return a > b || (std::isnan(a) && !std::isnan(b));
    return a < b || (std::isnan(b) && !std::isnan(a));
}

// The positions along dim of the first k of each line in that order; x's shape with k at dim.
static IndexTensor order_along(const Array& x, std::size_t dim, std::size_t k, bool descending) {
    const ArrayShape xs = array_shape(x);
    const DimSplit s = split_at(as_lines(xs), dim);
    ArrayShape os = xs;
    if (!os.empty()) os[dim] = k;
    IndexArray order(os);
    std::vector<std::size_t> line(s.n);
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t j = 0; j < s.inner; ++j) {
            const real* px = x.data() + o * s.n * s.inner + j;  // x[o, i, j] = px[i · inner]
            std::iota(line.begin(), line.end(), std::size_t{0});
            std::partial_sort(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(k), line.end(),
                              [&](std::size_t a, std::size_t b) {
                                  const real va = px[a * s.inner], vb = px[b * s.inner];
                                  if (comes_before(va, vb, descending)) return true;
                                  return !comes_before(vb, va, descending) && a < b;  // a tie: lower position first
                              });
            for (std::size_t r = 0; r < k; ++r)
                order.data()[(o * k + r) * s.inner + j] = static_cast<std::int64_t>(line[r]);
        }
    return IndexTensor(std::move(order));
}

// ---- topk ------------------------------------------------------------------------------------------
// forward : indices[o, r, j] = the position of the r-th largest (smallest) of x[o, :, j], r < k
//           values = gather(x, dim, indices)                       both (outer, k, inner)
// backward: dL/dx[o, indices[o, r, j], j] = g[o, r, j], 0 elsewhere      (gather's backward)
// ref: PyTorch docs, torch.topk
ValuesIndices topk(const Tensor& x, std::int64_t k, int dim, bool largest, bool /*sorted: always*/) {
    const ArrayShape xs = as_lines(array_shape(x.data()));
    const std::size_t d = normalize_dim(dim, xs.size(), "topk");
    const auto n = static_cast<std::int64_t>(xs[d]);
    check(k >= 0 && k <= n, "topk", "k {} out of range [0, {}] for dim {} of shape {}", k, n, dim, shape_str(x.shape()));
    check(x.dim() > 0 || k == 1, "topk", "k {} for a 0-d tensor, which holds one element: k must be 1", k);
    IndexTensor indices = order_along(x.data(), d, static_cast<std::size_t>(k), /*descending=*/largest);
    return {gather(x, dim, indices), std::move(indices)};
}

// ---- sort / argsort --------------------------------------------------------------------------------
// forward : indices = the stable order of each line along dim;  values = gather(x, dim, indices)
// backward: dL/dx[o, indices[o, r, j], j] = g[o, r, j]                   (gather's backward)
// ref: PyTorch docs, torch.sort (stable=True), torch.argsort
IndexTensor argsort(const Tensor& x, int dim, bool descending) {
    const ArrayShape xs = as_lines(array_shape(x.data()));
    const std::size_t d = normalize_dim(dim, xs.size(), "argsort");
    return order_along(x.data(), d, xs[d], descending);
}

ValuesIndices sort(const Tensor& x, int dim, bool descending) {
    const ArrayShape xs = as_lines(array_shape(x.data()));
    const std::size_t d = normalize_dim(dim, xs.size(), "sort");
    IndexTensor indices = order_along(x.data(), d, xs[d], descending);
    return {gather(x, dim, indices), std::move(indices)};
}

}  // namespace xgrad
