// core/indexing.cpp — integer indexing: check_ids, index_select (the row gather), one_hot.
//
// Legend: src (V, d...) a table of V rows; index / ids (P...) int64; y (P..., d...); g = dL/dy.
#include <algorithm>
#include <optional>
#include <vector>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/indexing.hpp>

namespace xgrad {

void check_ids(const IndexTensor& ids, std::int64_t limit, const char* op) {
    const IndexArray& a = ids.data();
    for (std::size_t f = 0; f < a.size(); ++f) {
        const std::int64_t v = a.data()[f];
        if (v >= 0 && v < limit) continue;
        std::vector<std::size_t> pos(a.dimension());
        std::size_t rem = f;
        for (std::size_t i = a.dimension(); i-- > 0;) {
            pos[i] = rem % a.shape()[i];
            rem /= a.shape()[i];
        }
        throw IndexError(fmt::format("{}: index {} at position {} out of range [0, {})", op, v,
                                     shape_str(pos), limit));
    }
}

// ---- index_select (dim 0): the row gather ----------------------------------------------------
// forward : y[p, :] = src[index[p], :]          src (V, d...), index any shape (P...),
//                                               y (P..., d...)  (PyTorch needs a 1-D index)
// backward: dL/dsrc[r, :] = Σ_{p : index[p] = r} g[p, :]     a row scatter-add
// Only the rows that appeared are touched, and duplicates sum: the backward returns the P rows
// of g with their indices (a RowSparseGrad), which the engine adds into src.grad in O(P·d).
Tensor index_select(const Tensor& src, int dim, const IndexTensor& index) {
    const profiler::OpScope scope("index_select", src);
    check(src.dim() >= 1, "index_select", "source must have at least 1 dim; got shape {}",
          lazy_shape(src.shape()));
    check(normalize_dim(dim, src.dim(), "index_select") == 0, "index_select",
          "only dim 0 (row gather) is supported; got dim {}", dim);
    const ArrayShape ss = array_shape(src.data());
    const auto rows = static_cast<std::int64_t>(ss[0]);
    check_ids(index, rows, "index_select");
    const std::size_t width = src.numel() / std::max<std::size_t>(ss[0], 1);  // d (or d·...)
    ArrayShape ys = array_shape(index.data());
    ys.insert(ys.end(), ss.begin() + 1, ss.end());
    Array y(ys);
    const std::int64_t* ids = index.data().data();
    const std::size_t P = index.numel();
    for (std::size_t p = 0; p < P; ++p)
        std::copy_n(src.data().data() + static_cast<std::size_t>(ids[p]) * width, width, y.data() + p * width);

    return make_result(std::move(y), "index_select", {src},
                       [ss, index, width, P](const Array& g, const Array&) -> Grads {
                           // rows (P, d...) = g reshaped; the engine scatter-adds them at `index`
                           ArrayShape rs{P};
                           rs.insert(rs.end(), ss.begin() + 1, ss.end());
                           Array rows(rs);
                           std::copy_n(g.data(), P * width, rows.data());
                           const std::int64_t* ids = index.data().data();
                           return make_grads(RowSparseGrad{std::vector<std::int64_t>(ids, ids + P), std::move(rows)});
                       });
}

// ---- one_hot ---------------------------------------------------------------------------------
// y[p, c] = 1 if ids[p] = c else 0           ids (P...), y (P..., C); no gradient
// The reference path for embeddings: one_hot(ids, V) @ E equals index_select(E, 0, ids),
// at O(P·V·d) multiply-adds instead of O(P·d) copies.
Tensor one_hot(const IndexTensor& ids, std::int64_t classes) {
    check(classes >= 0, "one_hot", "num_classes must be >= 0; got {}", classes);
    check_ids(ids, classes, "one_hot");
    const auto num_classes = static_cast<std::size_t>(classes);
    ArrayShape ys = array_shape(ids.data());
    ys.push_back(num_classes);
    checked_numel(ys, "one_hot");
    Array y = xt::zeros<real>(ys);
    for (std::size_t p = 0; p < ids.data().size(); ++p)
        y.data()[p * num_classes + static_cast<std::size_t>(ids.data().data()[p])] = 1;
    return from_array(std::move(y));
}

}  // namespace xgrad
