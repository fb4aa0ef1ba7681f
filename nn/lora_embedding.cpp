// nn/lora_embedding.cpp — the LoRA adapter of an Embedding (nn/lora.hpp, LoRAEmbedding): its term
// beside the host's lookup, its merge, and add_lora for a table.
//
//   y (..., d) = E[ids] + s · (Aᵀ[ids]) (..., r) · Bᵀ (r, d)      Aᵀ (V, r) a table of its own
//
// ref: Hugging Face PEFT, tuners/lora/layer.py, class Embedding (lora_embedding_A zeros, B normal)
#include <xgrad/nn/lora.hpp>

#include <utility>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/nn/detail/lora.hpp>

namespace xgrad::nn {

LoRAEmbedding::LoRAEmbedding(Embedding& host, const LoRAOptions& options)
    : LoRAAdapter(options, host.weight), host_(&host) {
    const std::int64_t V = host.num_embeddings(), d = host.embedding_dim(), r = options.rank();
    detail::check_embedding_lora_options(V, d, options);
    // Aᵀ looked up as the host looks up E: the padding row gets no gradient, sparse gives row-sparse ones.
    A = std::make_shared<Embedding>(V, r, EmbeddingOptions().padding_idx(host.options().padding_idx())
                                              .sparse(host.options().sparse()));
    A->weight.mutable_data().fill(0);  // A = 0: s·(B·A)ᵀ = 0, the adapted table starts as the base
    B = std::make_shared<Linear>(r, d, /*bias=*/false);
    B->weight.mutable_data() = randn({d, r}).data();  // (d, r) ~ N(0, 1)
}

// ids (...) → Aᵀ[ids] (..., r) → B → (..., d), times s, added to the base's E[ids]. Backward scatters
// into the rows of Aᵀ looked up, and reaches B through its Linear product; the frozen E gets nothing.
Tensor LoRAEmbedding::apply(const IndexTensor& ids, const Tensor& y) const {
    if (!active(A->is_training())) return y;
    return y + B->forward(A->forward(ids)) * real(options_.scaling());
}

// E (V, d) += s · Aᵀ (V, r) · Bᵀ (r, d): one gemm, accumulated into E (beta = 1). Refused for a
// table tied to a head, before any change: the head's W is E, so every logit would move too.
void LoRAEmbedding::add_update(double s, real* E) const {
    check(!host_->tied(), "LoRA::merge", "the Embedding ({} × {}) is tied to an output head (nn::tie_weights): "
          "merging s·(B·A)ᵀ into the table would change the head's W, and every logit, too; run the adapter "
          "unmerged", host_->num_embeddings(), host_->embedding_dim());
    const std::size_t V = std::size_t(host_->num_embeddings()), d = std::size_t(host_->embedding_dim()),
                      r = std::size_t(options_.rank());
    gemm(false, true, V, d, r, real(s), A->weight.data().data(), r, B->weight.data().data(), r, 1, E, d);
}

LoRAEmbedding& add_lora(Embedding& table, const LoRAOptions& options) {
    check(table.lora_ == nullptr, "add_lora", "this Embedding ({} × {}) has an adapter already",
          table.num_embeddings(), table.embedding_dim());
    auto adapter = std::make_shared<LoRAEmbedding>(table, options);  // checks the options
    adapter->A->train(table.is_training());
    adapter->B->train(table.is_training());
    table.register_module("lora_embedding_A", adapter->A);
    table.register_module("lora_embedding_B", adapter->B);
    // Frozen: the lookup's backward scatters no rows into E (nn/embedding.cpp), and E keeps no optimizer state.
    table.weight.requires_grad_(false);
    table.lora_ = std::move(adapter);
    return *table.lora_;
}

}  // namespace xgrad::nn
