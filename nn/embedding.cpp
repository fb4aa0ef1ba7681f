// nn/embedding.cpp — functional::embedding (the row lookup and its row-scatter backward, dense
// or row-sparse), then the Embedding module that owns the table and calls it.
#include <xgrad/nn/embedding.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/indexing.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/nn/lora.hpp>

namespace xgrad::nn {

namespace functional {

// ---- embedding ---------------------------------------------------------------------------------------
// forward : y[p, :] = E[ids[p], :]           E (V, d), ids (P...) flattened to P, y (P..., d)
//           the same as one_hot(ids, V) @ E, but d copies per token instead of V·d products
// backward: dL/dE[r, :] = Σ_{p : ids[p] = r, r ≠ padding_idx} g[p, :]
//           a scatter-add into the k distinct rows that appeared: O(P·d) work. Rows that did
//           not appear get no gradient at all (their gradient is exactly 0).
// ref: PyTorch docs, torch.nn.functional.embedding; the lesson "From Token IDs to Embedding Vectors"
namespace {

// Checks weight (V, d), padding_idx and ids; returns padding_idx in [0, V), or -1 for none.
std::int64_t check_embedding_args(const Tensor& weight, const IndexTensor& ids,
                                  std::optional<std::int64_t> padding_idx, bool sparse) {
    check_defined(weight, "embedding", "the weight");
    check(weight.dim() == 2, "embedding", "weight must be (V, d); got shape {}", lazy_shape(weight.shape()));
    const auto V = static_cast<std::int64_t>(weight.shape()[0]);
    if (padding_idx) {
        check(*padding_idx >= -V && *padding_idx < V, "embedding", "padding_idx {} out of range [{}, {})",
              *padding_idx, -V, V);
        if (*padding_idx < 0) padding_idx = *padding_idx + V;
    }
    check(!sparse || !weight.requires_grad() || weight.is_leaf(), "embedding",
          "sparse=true needs the weight to be a leaf tensor (a parameter)");
    check_ids(ids, V, "embedding");
    return padding_idx.value_or(-1);
}

// The row gather: y[p, :] = E[ids[p], :], one copy of d values per token.   y (P..., d)
Array gather_rows(const Array& table, const IndexTensor& ids) {
    const std::size_t P = ids.numel(), d = table.shape()[1];
    ArrayShape ys = array_shape(ids.data());
    ys.push_back(d);
    Array y(ys);
    const std::int64_t* id = ids.data().data();
    const real* E = table.data();
    for (std::size_t p = 0; p < P; ++p) {
        // Fast path for large tables: the rows are scattered over memory that the caches do not
        // hold, so row p + 2 is requested while row p is copied (bench/, W4 at V = 1e6).
        if (p + 2 < P) {
            const char* ahead = reinterpret_cast<const char*>(E + static_cast<std::size_t>(id[p + 2]) * d);
            for (std::size_t b = 0; b < d * sizeof(real); b += 64) __builtin_prefetch(ahead + b);
        }
        std::copy_n(E + static_cast<std::size_t>(id[p]) * d, d, y.data() + p * d);
    }
    return y;
}

// The row scatter, dense: the (kept, d) rows of g with their ids; the engine adds each into its row
// of weight.grad (allocated as zeros once). A non-leaf weight gets them densified.
Grads scatter_rows(const Array& g, const IndexTensor& ids, std::int64_t pad, std::size_t d,
                   EmbeddingStats* stats) {
    const std::size_t P = ids.numel();
    const std::int64_t* id = ids.data().data();
    RowSparseGrad r;
    r.indices.reserve(P);
    for (std::size_t p = 0; p < P; ++p)
        if (id[p] != pad) r.indices.push_back(id[p]);  // every lookup but padding_idx's
    const std::size_t kept = r.indices.size();
    r.rows = Array(ArrayShape{kept, d});
    for (std::size_t p = 0, k = 0; p < P; ++p)
        if (id[p] != pad) std::copy_n(g.data() + p * d, d, r.rows.data() + d * k++);
    if (stats) {
        std::vector<std::int64_t> distinct(r.indices);  // sorted only to count them
        std::sort(distinct.begin(), distinct.end());
        const std::size_t k =
            static_cast<std::size_t>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
        stats->tokens = P;
        stats->rows_touched = k;
        stats->duplicates = kept - k;
        // kept additions of d values; the one-time zero-fill of a new (V, d) .grad is not counted.
        stats->bytes_written = kept * d * sizeof(real);
    }
    return make_grads(std::move(r));
}

// The row scatter, row-sparse: one coalesced row per distinct index, rows ascending. The lookups are
// sorted by (row, position), and each row's lookups are summed straight from g into a (k, d) block,
// in position order. The engine merges it with a sparse gradient held, or adds it into a dense one
// (a table tied to an output head, nn/tying.hpp).
Grads scatter_rows_coalesced(const Array& g, const IndexTensor& ids, std::int64_t pad, std::size_t d,
                             EmbeddingStats* stats) {
    const std::size_t P = ids.numel();
    const std::int64_t* id = ids.data().data();
    std::vector<std::pair<std::int64_t, std::size_t>> lookups;  // (row, position p in g)
    lookups.reserve(P);
    for (std::size_t p = 0; p < P; ++p)
        if (id[p] != pad) lookups.emplace_back(id[p], p);  // every lookup but padding_idx's
    std::sort(lookups.begin(), lookups.end());
    std::vector<std::int64_t> distinct;  // the k rows that appeared, ascending
    for (std::size_t i = 0; i < lookups.size(); ++i)
        if (i == 0 || lookups[i].first != lookups[i - 1].first) distinct.push_back(lookups[i].first);
    if (stats) {
        stats->tokens = P;
        stats->rows_touched = distinct.size();
        stats->duplicates = lookups.size() - distinct.size();
        stats->bytes_written = distinct.size() * (d * sizeof(real) + sizeof(std::int64_t));
    }
    Array values(ArrayShape{distinct.size(), d});
    std::size_t k = 0;    // output rows started so far
    real* out = nullptr;  // the output row being summed
    for (std::size_t i = 0; i < lookups.size(); ++i) {
        const real* src = g.data() + lookups[i].second * d;
        if (i == 0 || lookups[i].first != lookups[i - 1].first) {
            out = values.data() + d * k++;
            std::copy_n(src, d, out);
        } else {  // a repeated row: add to its sum
            for (std::size_t j = 0; j < d; ++j) out[j] += src[j];
        }
    }
    return make_grads(RowSparseGrad{std::move(distinct), std::move(values), /*keep_sparse=*/true});
}

}  // namespace

Tensor embedding(const Tensor& weight, const IndexTensor& ids, std::optional<std::int64_t> padding_idx,
                 bool sparse, std::shared_ptr<EmbeddingStats> stats) {
    const profiler::OpScope scope("embedding", weight);
    const std::int64_t pad = check_embedding_args(weight, ids, padding_idx, sparse);
    const std::size_t d = weight.shape()[1];
    return make_result(gather_rows(weight.data(), ids), "embedding", {weight},
                       [ids, pad, sparse, stats, d](const Array& g, const Array&) -> Grads {
        // in the forward pass this was: y[p, :] = E[ids[p], :]; so dL/dE[ids[p], :] += g[p, :]
        return sparse ? scatter_rows_coalesced(g, ids, pad, d, stats.get())
                      : scatter_rows(g, ids, pad, d, stats.get());
    });
}

}  // namespace functional

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, EmbeddingOptions options)
    : V_(num_embeddings), d_(embedding_dim), options_(options) {
    check(V_ > 0 && d_ > 0, "Embedding", "num_embeddings and embedding_dim must be positive; got ({}, {})",
          V_, d_);
    // V·d at most kMaxNumel (core/tensor.hpp), checked without computing a product that could wrap
    check(std::uint64_t(d_) <= kMaxNumel / std::uint64_t(V_), "Embedding",
          "a ({}, {}) table is too large: more than 2^60 elements", V_, d_);
    if (options_.padding_idx()) {
        const std::int64_t p = *options_.padding_idx();
        check(p >= -V_ && p < V_, "Embedding", "padding_idx {} out of range [{}, {})", p, -V_, V_);
        options_.padding_idx(p < 0 ? p + V_ : p);  // stored in [0, V)
    }
    Tensor w = randn({V_, d_});  // N(0, 1), as torch.nn.Embedding
    if (options_.padding_idx()) {
        real* row = w.mutable_data().data() + std::size_t(*options_.padding_idx()) * std::size_t(d_);
        std::fill(row, row + d_, real(0));
    }
    weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const IndexTensor& ids) const {
    check(weight.impl() == registered_parameter("weight").impl(), "Embedding",
          "the member 'weight' is no longer the registered parameter (was it reassigned?); the "
          "optimizer and state_dict() still hold the registered tensor, so this forward would read a "
          "tensor that is never trained. To share the table with an output head use "
          "nn::tie_weights(head, table); to set values, write through weight.mutable_data() or nn::init");
    const Tensor y = functional::embedding(weight, ids, options_.padding_idx(), options_.sparse(), stats_);
    return lora_ ? lora_->apply(ids, y) : y;
}

void Embedding::check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const {
    if (lora_) lora_->check_state(path, loading, op);
}

}  // namespace xgrad::nn
