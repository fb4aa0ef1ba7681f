// core/accumulate.cpp — a leaf's gradient: the one place that writes .grad and sparse_grad.
// The backward pass (core/autograd.cpp) calls accumulate_leaf for what reaches a leaf; Tensor,
// the optimizers and DDP call the four functions that replace, drop, zero and scale a gradient.
// The rules of accumulation (as PyTorch's AccumulateGrad, and torch.sparse's coalesce):
//   dense + dense   = dense    .grad += g; the first gradient is moved in, not copied
//   sparse + sparse = sparse   rows merged: unique ascending indices, duplicates summed
//   sparse + dense  = dense    a sparse table tied to an output head (nn/tying.hpp): the head's
//                              matmul gradient covers all V rows, so the sum is dense anyway
//   rows, keep_sparse = false  scatter-added into the dense .grad: O(n·d), never a (V, d) temporary
// Everything is checked against the leaf's CURRENT shape before anything is written: a table
// resized through data() after a backward must not receive rows, or hold ones, past its end.
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/detail/accumulate.hpp>

#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>

#include <xtensor/xnoalias.hpp>

template <>
struct fmt::formatter<xgrad::xgrad_detail::Source> : fmt::formatter<std::string> {
    template <class FormatContext>
    auto format(const xgrad::xgrad_detail::Source& s, FormatContext& ctx) const {
        return fmt::formatter<std::string>::format(
            s.input < 0 ? std::string(s.op) : fmt::format("op '{}', input {}", s.op, s.input), ctx);
    }
};

namespace xgrad {
namespace {
using xgrad_detail::Source;

constexpr const char* kAfterResize = "call zero_grad() (set_to_none) after resizing a parameter";

template <class A, class B>
bool shapes_equal(const A& a, const B& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// Elements per row of a table of shape (V, d...): d·...
std::size_t row_width(const Array::shape_type& shape) {
    std::size_t w = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) w *= shape[i];
    return w;
}

// Throws unless the gradient `leaf` holds fits its current shape. `source` names who is adding.
void check_held(const TensorImpl& leaf, const Source& source) {
    const auto& now = leaf.data.shape();
    if (leaf.grad) {
        check(shapes_equal(leaf.grad->data.shape(), now), "backward",
              "gradient of shape {} held for a leaf now of shape {} ({}); {}",
              lazy_shape(leaf.grad->data.shape()), lazy_shape(now), source, kAfterResize);
    }
    if (leaf.sparse_grad) {
        const SparseGrad& sg = *leaf.sparse_grad;
        check(shapes_equal(sg.dense_shape, now), "backward",
              "row-sparse gradient of shape {} held for a leaf now of shape {} ({}); {}",
              lazy_shape(sg.dense_shape), lazy_shape(now), source, kAfterResize);
        for (std::int64_t row : sg.indices) {
            check(row >= 0 && static_cast<std::size_t>(row) < now[0], "backward",
                  "row-sparse gradient holds row {} of a leaf now of shape {} ({}); {}", row,
                  lazy_shape(now), source, kAfterResize);
        }
    }
}

// dst[indices[i], ...] += rows[i, ...]: the row scatter-add, duplicates summing.
void scatter_add(Array& dst, const RowSparseGrad& r) {
    const std::size_t w = row_width(dst.shape());
    for (std::size_t i = 0; i < r.indices.size(); ++i) {
        real* row = dst.data() + static_cast<std::size_t>(r.indices[i]) * w;
        const real* src = r.rows.data() + i * w;
        for (std::size_t j = 0; j < w; ++j) row[j] += src[j];
    }
}

bool strictly_ascending(const std::vector<std::int64_t>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

// grad += g in place, bumping its version: a graph that used x.grad() in an op then refuses to
// backward with the changed values, as after PyTorch's in-place accumulation.
void add_in_place(TensorImpl& grad, const Array& g) {
    xt::noalias(grad.data) += g;
    ++grad.version;
}

// Adds a checked `g` into `leaf`'s gradient (check_held and check_new have passed).
void add_to_leaf(TensorImpl& leaf, Grad g) {
    if (Array* dense = std::get_if<Array>(&g.value)) {
        if (leaf.sparse_grad) {  // sparse + dense = dense
            const SparseGrad& sg = *leaf.sparse_grad;
            scatter_add(*dense, RowSparseGrad{sg.indices, sg.values});
            leaf.sparse_grad.reset();
        }
        if (!leaf.grad) leaf.grad = std::make_shared<TensorImpl>(std::move(*dense));
        else add_in_place(*leaf.grad, *dense);
        return;
    }
    RowSparseGrad& r = std::get<RowSparseGrad>(g.value);
    if (r.keep_sparse && !leaf.grad) {  // sparse + sparse = sparse
        if (!leaf.sparse_grad) {
            leaf.sparse_grad = std::make_unique<SparseGrad>();
            leaf.sparse_grad->dense_shape = to_shape(leaf.data.shape());
            leaf.sparse_grad->values = Array(ArrayShape{0, leaf.data.shape()[1]});
        }
        SparseGrad& sg = *leaf.sparse_grad;
        if (sg.indices.empty() && strictly_ascending(r.indices)) {  // already coalesced: moved in
            sg.indices = std::move(r.indices);
            sg.values = std::move(r.rows);
        } else {
            sg.accumulate(r.indices, r.rows);
        }
        return;
    }
    if (!leaf.grad) {  // the one-time (V, d...) dense gradient; a held sparse one joins it
        const ArrayShape now(leaf.data.shape().begin(), leaf.data.shape().end());
        leaf.grad = std::make_shared<TensorImpl>(leaf.sparse_grad ? leaf.sparse_grad->to_dense() : zeros_array(now));
        leaf.sparse_grad.reset();
    }
    scatter_add(leaf.grad->data, r);
    ++leaf.grad->version;
}

// The locks of leaf_lock (below). fork() takes them all and both processes release them, so that
// none stays held in the child by a thread it does not have (registered at load: see
// generator_mutex in core/tensor.cpp for the order). 32: ThreadSanitizer follows at most 64 locks
// held by one thread, and fork() also holds the pool's and the generator's.
constexpr std::size_t kLeafLocks = 32;
std::mutex g_leaf_locks[kLeafLocks];
const int g_leaf_locks_atfork = pthread_atfork([] { for (std::mutex& m : g_leaf_locks) m.lock(); },
                                               [] { for (std::mutex& m : g_leaf_locks) m.unlock(); },
                                               [] { for (std::mutex& m : g_leaf_locks) m.unlock(); });

// Drops both kinds of gradient; the caller holds leaf_lock(leaf).
void drop_grad(TensorImpl& leaf) {
    leaf.grad.reset();
    leaf.sparse_grad.reset();
}

}  // namespace

// Leaves' gradients are written under one of these locks, picked by the leaf's address, so that
// threads backwarding into a shared leaf sum their gradients (as PyTorch's AccumulateGrad lock).
std::mutex& leaf_lock(const TensorImpl& leaf) {
    return g_leaf_locks[(reinterpret_cast<std::uintptr_t>(&leaf) / alignof(TensorImpl)) % kLeafLocks];
}

void check_new(const Grad& g, const Array::shape_type& shape, const char* op, const Source& source) {
    if (const Array* dense = std::get_if<Array>(&g.value)) {
        check(shapes_equal(dense->shape(), shape), op, "{} gives a gradient of shape {} for a tensor of shape {}",
              source, lazy_shape(dense->shape()), lazy_shape(shape));
        return;
    }
    const RowSparseGrad& r = std::get<RowSparseGrad>(g.value);
    const auto& rs = r.rows.shape();
    check(!shape.empty() && rs.size() == shape.size() && rs[0] == r.indices.size() &&
              std::equal(rs.begin() + 1, rs.end(), shape.begin() + 1),
          op, "{} gives {} gradient rows of shape {} for a table of shape {}", source, r.indices.size(),
          lazy_shape(rs), lazy_shape(shape));
    check(!r.keep_sparse || shape.size() == 2, op, "{} gives a sparse gradient for a table of shape {}; "
          "sparse gradients are for (V, d) tables", source, lazy_shape(shape));
    for (std::size_t i = 0; i < r.indices.size(); ++i) {
        const std::int64_t row = r.indices[i];
        check(row >= 0 && static_cast<std::size_t>(row) < shape[0], op,
              "{} gives a gradient for row {} (position {}) of a table of shape {}; rows are in [0, {})",
              source, row, i, lazy_shape(shape), shape[0]);
    }
}

void accumulate_leaf(TensorImpl& leaf, Grad g, const char* op, const Source& source) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    check_parameter_shape(leaf, "backward");
    check_new(g, leaf.data.shape(), op, source);
    check_held(leaf, source);
    add_to_leaf(leaf, std::move(g));
}

void add_to_sum(std::optional<Array>& sum, Grad g, const Array::shape_type& shape) {
    if (Array* dense = std::get_if<Array>(&g.value)) {
        if (!sum) sum = std::move(*dense);
        else xt::noalias(*sum) += *dense;
        return;
    }
    if (!sum) sum = zeros_array(ArrayShape(shape.begin(), shape.end()));
    scatter_add(*sum, std::get<RowSparseGrad>(g.value));
}

const Array& grad_values(const Grad& g) {
    if (const Array* dense = std::get_if<Array>(&g.value)) return *dense;
    return std::get<RowSparseGrad>(g.value).rows;
}

void set_leaf_grad(TensorImpl& leaf, Grad g) {
    check_new(g, leaf.data.shape(), "set_grad", Source{"set_grad"});
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    drop_grad(leaf);
    add_to_leaf(leaf, std::move(g));
}

void clear_grad(TensorImpl& leaf) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    drop_grad(leaf);
}

// zero_grad_ and scale_grad_ change the gradient in place and bump its version, so that a graph
// recorded on it (x.grad() used in an op) refuses to backward afterwards, as PyTorch's zero_().
void zero_grad_(TensorImpl& leaf) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    if (leaf.grad) {
        leaf.grad->data.fill(0);
        ++leaf.grad->version;
    }
    if (leaf.sparse_grad) {  // an empty coalesced gradient: k = 0 rows
        leaf.sparse_grad->indices.clear();
        leaf.sparse_grad->values = Array(ArrayShape{0, static_cast<std::size_t>(leaf.sparse_grad->dense_shape.at(1))});
    }
}

void scale_grad_(TensorImpl& leaf, real c) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    Array* a = leaf.sparse_grad ? &leaf.sparse_grad->values : leaf.grad ? &leaf.grad->data : nullptr;
    if (!a) return;
    if (leaf.grad) ++leaf.grad->version;
    real* p = a->data();
    for (std::size_t i = 0; i < a->size(); ++i) p[i] *= c;
}

}  // namespace xgrad
