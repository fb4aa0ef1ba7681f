// examples/gpt/llama.hpp — the same language model with LLaMA's block (Touvron et al. 2023).
//
// Legend as in model.hpp; Hkv K/V heads (GPTConfig::n_kv_head), F the SwiGLU hidden width.
//
//   idx (B, T) int64
//   x = tok_embeddings[idx]                       (B, T, d)   no position vector: rope, inside attention
//   for each of the L layers (pre-norm residual blocks):
//       h = x + attention(attention_norm(x))      (B, T, d)   grouped-query attention, q and k rotated
//       x = h + feed_forward(ffn_norm(h))         (B, T, d)   SwiGLU: w2(silu(w1 x) ⊙ w3 x), d → F → d
//   logits = norm(x) · outputᵀ                    (B, T, V)   output tied to tok_embeddings, or its own
//
// RMSNorm, SwiGLU (F = 8d/3 rounded up to a multiple of 64), rope, no biases, Hkv ≤ H K/V heads;
// parameter names are Meta's (facebookresearch/llama model.py), the tied output stored once as
// tok_embeddings.weight. examples/gpt/README.md, "GPT-2's block and LLaMA's", compares the two.
// ref: Touvron et al. 2023, "LLaMA"; facebookresearch/llama model.py.
#pragma once

#include <memory>

#include "model.hpp"

namespace gpt {

// One pre-norm LLaMA block: h = x + attention(attention_norm(x)); h + feed_forward(ffn_norm(h)).
class LlamaBlock : public nn::Module {
public:
    explicit LlamaBlock(const GPTConfig& c);
    Tensor forward(Tensor x) const;                              // (B, T, d) → (B, T, d)
    Tensor forward_cached(Tensor x, nn::KVCache& cache) const;   // the new positions (B, t, d)

    std::shared_ptr<nn::CausalSelfAttention> attention;  // wq, wk, wv, wo; no biases
    std::shared_ptr<nn::SwiGLU> feed_forward;            // w1, w2, w3
    std::shared_ptr<nn::RMSNorm> attention_norm, ffn_norm;
};

class Llama : public LanguageModel {
public:
    // Builds and initialises the model from the global generator (manual_seed) with GPT-2's rule
    // applied to these names (Meta publishes none for training): weights N(0, 0.02), the residual
    // outputs wo and w2 N(0, 0.02/√(2L)), RMSNorm weights 1. Throws ValueError for arch other than
    // llama, pos other than rope, bias on, a non-positive size, d not divisible by H, an odd head
    // width, n_kv_head not dividing H, dropout outside [0, 1), or sparse_embedding with a tied output.
    explicit Llama(const GPTConfig& config);

    Tensor forward(const IndexTensor& idx) const override;
    Tensor forward_cached(const IndexTensor& idx, std::vector<nn::KVCache>& caches) const override;
    Tensor attention_weights(const IndexTensor& idx, std::int64_t layer) const override;
    const nn::Embedding& token_embedding() const override { return *tok_embeddings; }

    std::shared_ptr<nn::Embedding> tok_embeddings;        // (V, d)
    std::shared_ptr<nn::ModuleList<LlamaBlock>> layers;   // "0", "1", ...
    std::shared_ptr<nn::RMSNorm> norm;                    // (d)
    std::shared_ptr<nn::Linear> output;                   // (V, d), no bias; IS tok_embeddings.weight when tied

private:
    Tensor trunk(const IndexTensor& idx, std::int64_t n_layers) const;  // (B, T, d) after the first n layers
};

}  // namespace gpt
