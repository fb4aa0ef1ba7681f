// nn/embedding.hpp — a learned table E (V, d) whose rows are looked up by ID:
// functional::embedding and the Embedding module.
//
//   ids (...) int64  →  E[ids] (..., d)
//
// A token ID is only a label; the lookup gives it a vector of d learned numbers. Selecting
// row t equals the product of a one-hot row o_t (1, V) with E (V, d), but costs d copies
// instead of V·d multiply-adds. The same holds backward: only the rows that were looked up
// receive gradient, so the backward is a scatter-add over those rows, O(tokens·d), and never
// touches the other V - k rows.
//
// ref: PyTorch docs, torch.nn.Embedding; Bengio et al. 2003, "A Neural Probabilistic Language Model"
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/tensor.hpp"
#include "nn/module.hpp"

namespace xgrad::nn {

namespace functional {

// What one Embedding backward did; written by the backward pass, read by the caller.
struct EmbeddingStats {
    std::size_t tokens = 0;         // IDs looked up (padding included)
    std::size_t rows_touched = 0;   // distinct rows that received gradient (k)
    std::size_t duplicates = 0;     // lookups of a row already seen in the batch: tokens - padding - k
    std::size_t bytes_written = 0;  // gradient bytes written by this backward: dense, one row
                                    // of d values per non-padding lookup; sparse, k rows + k indices
};

// Row lookup y[..., :] = weight[ids[...], :].   weight (V, d), ids any shape (...) int64,
// y (..., d). The backward is a row scatter-add that touches only the rows in `ids`:
// O(tokens·d) work, independent of V.
//   padding_idx: that row gets no gradient (may be negative, counting from the end).
//   sparse=false: weight.grad is a dense (V, d) tensor; only the touched rows are written.
//   sparse=true : weight.sparse_grad() is a coalesced row-sparse gradient (k unique rows);
//                 weight must then be a leaf (a parameter).
//   stats: if given, filled in by each backward.
// Throws IndexError for an ID outside [0, V) (with its position and value), ValueError for
// a bad padding_idx or a non-2-D weight.  ref: PyTorch docs, torch.nn.functional.embedding
Tensor embedding(const Tensor& weight, const IndexTensor& ids, std::optional<std::int64_t> padding_idx = {},
                 bool sparse = false, std::shared_ptr<EmbeddingStats> stats = nullptr);

}  // namespace functional

struct EmbeddingOptions {
    // This row gets no gradient and is initialised to zeros. Negative values count from the
    // end (-1 is row V-1). Must lie in [-V, V).
    std::optional<std::int64_t> padding_idx;
    // Produce a row-sparse, coalesced gradient (indices (k,) + values (k, d)) instead of a
    // dense (V, d) one. optim::Adam and AdamW then update only those k rows.
    bool sparse = false;

    EmbeddingOptions& set_padding_idx(std::int64_t p) { padding_idx = p; return *this; }
    EmbeddingOptions& set_sparse(bool s) { sparse = s; return *this; }
};

class Embedding : public Module {
public:
    // weight (V, d) ~ N(0, 1), as PyTorch initialises it; the padding row is zeroed.
    // Throws ValueError if V or d is not positive, or padding_idx is outside [-V, V).
    Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, EmbeddingOptions options = {});

    // ids (...) int64 → (..., d). Throws IndexError naming the position and value of an ID
    // outside [0, V), and V. IDs are never clamped or wrapped. Throws ValueError if `weight`
    // was reassigned to another tensor than the registered one (see Linear::forward).
    Tensor forward(const IndexTensor& ids) const;

    std::int64_t num_embeddings() const { return V_; }
    std::int64_t embedding_dim() const { return d_; }
    const EmbeddingOptions& options() const { return options_; }
    // Statistics of the most recent backward through this module: tokens, rows touched,
    // duplicate lookups and gradient bytes written.
    const functional::EmbeddingStats& last_backward_stats() const { return *stats_; }

    Tensor weight;  // (V, d), the registered parameter: change values in place, never reassign

private:
    std::int64_t V_, d_;
    EmbeddingOptions options_;
    std::shared_ptr<functional::EmbeddingStats> stats_ = std::make_shared<functional::EmbeddingStats>();
};

}  // namespace xgrad::nn
