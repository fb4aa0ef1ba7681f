// nn/embedding.cpp — the Embedding module; its op (lookup + row-scatter backward) is
// nn::functional::embedding in nn/functional.cpp.
#include "nn/embedding.hpp"

#include <cstdint>

namespace xgrad::nn {

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, EmbeddingOptions options)
    : V_(num_embeddings), d_(embedding_dim), options_(options) {
    check(V_ > 0 && d_ > 0, "Embedding", "num_embeddings and embedding_dim must be positive; got ({}, {})",
          V_, d_);
    // V·d·sizeof(real) must fit in memory's address range; otherwise the size would wrap around.
    check(std::uint64_t(d_) <= SIZE_MAX / sizeof(real) / std::uint64_t(V_), "Embedding",
          "a ({}, {}) table is too large to address", V_, d_);
    if (options_.padding_idx) {
        const std::int64_t p = *options_.padding_idx;
        check(p >= -V_ && p < V_, "Embedding", "padding_idx {} out of range [{}, {})", p, -V_, V_);
        options_.padding_idx = p < 0 ? p + V_ : p;  // stored in [0, V)
    }
    Tensor w = randn({std::size_t(V_), std::size_t(d_)});  // N(0, 1), as torch.nn.Embedding
    if (options_.padding_idx) {
        real* row = w.data().data() + std::size_t(*options_.padding_idx) * std::size_t(d_);
        std::fill(row, row + d_, real(0));
    }
    weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const IndexTensor& ids) const {
    check(weight.impl() == registered_parameter("weight").impl(), "Embedding",
          "the member 'weight' is no longer the registered parameter (was it reassigned?); the "
          "optimizer and state_dict() still hold the registered tensor, so this forward would read a "
          "tensor that is never trained. To share the table with an output head use "
          "nn::tie_weights(head, table); to set values, assign to weight.data()");
    return functional::embedding(weight, ids, options_.padding_idx, options_.sparse, stats_);
}

}  // namespace xgrad::nn
