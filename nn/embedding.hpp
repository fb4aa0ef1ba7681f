// nn/embedding.hpp — a learned table E (V, d) whose rows are looked up by ID:
// functional::embedding and the Embedding module.
//
//   ids (...) int64  →  E[ids] (..., d)
//
// Selecting row t equals one-hot o_t (1, V) · E (V, d), at d copies instead of V·d multiply-adds.
// Backward, only the rows looked up receive gradient: a scatter-add, O(tokens·d), independent of V.
//
// ref: PyTorch docs, torch.nn.Embedding; Bengio et al. 2003, "A Neural Probabilistic Language Model"
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

namespace functional {

// What one Embedding backward did.
struct EmbeddingStats {
    std::size_t tokens = 0;         // IDs looked up (padding included)
    std::size_t rows_touched = 0;   // distinct rows that received gradient (k)
    std::size_t duplicates = 0;     // lookups of a row already seen in the batch: tokens - padding - k
    std::size_t bytes_written = 0;  // gradient bytes: dense, d values per non-padding lookup;
                                    // sparse, k rows + k indices
};

// Row lookup y[..., :] = weight[ids[...], :].   weight (V, d), ids (...) int64, y (..., d).
//   padding_idx: that row gets no gradient (negative counts from the end).
//   sparse: weight.grad dense (V, d), or weight.sparse_grad() with k unique rows (weight a leaf).
//   stats: if given, filled in by each backward.
// Throws IndexError for an ID outside [0, V) (with its position and value), ValueError for
// a bad padding_idx or a non-2-D weight.  ref: PyTorch docs, torch.nn.functional.embedding
Tensor embedding(const Tensor& weight, const IndexTensor& ids, std::optional<std::int64_t> padding_idx = {},
                 bool sparse = false, std::shared_ptr<EmbeddingStats> stats = nullptr);

}  // namespace functional

// The Embedding module's options; setters chain, as LibTorch's:
//   nn::Embedding(V, d, nn::EmbeddingOptions().padding_idx(0).sparse(true))
class EmbeddingOptions {
public:
    // This row gets no gradient and starts at zeros; in [-V, V), negative from the end.
    EmbeddingOptions& padding_idx(std::optional<std::int64_t> v) { padding_idx_ = v; return *this; }
    // A row-sparse gradient (k rows) instead of dense (V, d); Adam and AdamW update only those.
    EmbeddingOptions& sparse(bool v) { sparse_ = v; return *this; }

    const std::optional<std::int64_t>& padding_idx() const { return padding_idx_; }  // (none)
    bool sparse() const { return sparse_; }                                            // (false)

private:
    std::optional<std::int64_t> padding_idx_;
    bool sparse_ = false;
};

class Embedding;
class Linear;
class LoRAEmbedding;
class LoRAOptions;
void tie_weights(Linear& head, Embedding& table);                  // nn/tying.hpp
LoRAEmbedding& add_lora(Embedding& table, const LoRAOptions& options);  // nn/lora.hpp

class Embedding : public Module {
public:
    // weight (V, d) ~ N(0, 1), as PyTorch initialises it; the padding row is zeroed.
    // Throws ValueError if V or d is not positive, the table passes 2^60 elements, or padding_idx is
    // outside [-V, V).
    Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, EmbeddingOptions options = {});

    // ids (...) int64 → (..., d), plus the LoRA adapter's term if it has one (nn/lora.hpp). Throws
    // IndexError naming the position and value of an ID outside [0, V), and V; ValueError if
    // `weight` was reassigned (see Linear::forward).
    Tensor forward(const IndexTensor& ids) const;

    std::int64_t num_embeddings() const { return V_; }
    std::int64_t embedding_dim() const { return d_; }
    const EmbeddingOptions& options() const { return options_; }
    // Statistics of the most recent backward through this module.
    const functional::EmbeddingStats& last_backward_stats() const { return *stats_; }
    // The adapter nn::add_lora gave this table, or null.
    LoRAEmbedding* lora() const { return lora_.get(); }
    // True once nn::tie_weights made it an output head's W too.
    bool tied() const { return tied_; }

    Tensor weight;  // (V, d), the registered parameter: change values in place, never reassign

protected:
    // As Linear's: its adapter's merged state, or a state dict without it, refused (LoRAAdapter::check_state).
    void check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const override;
    bool has_state_check() const override { return lora_ != nullptr; }

private:
    friend void tie_weights(Linear& head, Embedding& table);
    friend LoRAEmbedding& add_lora(Embedding& table, const LoRAOptions& options);

    std::int64_t V_, d_;
    EmbeddingOptions options_;
    std::shared_ptr<functional::EmbeddingStats> stats_ = std::make_shared<functional::EmbeddingStats>();
    std::shared_ptr<LoRAEmbedding> lora_;
    bool tied_ = false;
};

}  // namespace xgrad::nn
