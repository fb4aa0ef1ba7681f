// examples/gpt/llama.cpp — LLaMA's block and model; the shapes and the math are in llama.hpp.
#include "llama.hpp"


namespace gpt {

namespace F = nn::functional;

constexpr double kNormEps = 1e-5;  // Meta's ModelArgs.norm_eps

LlamaBlock::LlamaBlock(const GPTConfig& c) {
    const auto opts = nn::CausalSelfAttentionOptions()
                          .dropout(c.dropout)
                          .bias(false)
                          .rope(true)
                          .fast_kernels(c.fused_attention)
                          .n_kv_head(c.n_kv_head)
                          .llama_names(true);  // wq, wk, wv, wo
    const std::int64_t hidden = c.ffn_hidden > 0 ? c.ffn_hidden : nn::swiglu_hidden_width(c.d);
    attention = register_module("attention", std::make_shared<nn::CausalSelfAttention>(c.d, c.n_head, opts));
    feed_forward = register_module("feed_forward", std::make_shared<nn::SwiGLU>(c.d, hidden));
    attention_norm = register_module("attention_norm", std::make_shared<nn::RMSNorm>(c.d, kNormEps));
    ffn_norm = register_module("ffn_norm", std::make_shared<nn::RMSNorm>(c.d, kNormEps));
}

Tensor LlamaBlock::forward(Tensor x) const {
    x = x + attention->forward(attention_norm->forward(x));  // (B, T, d)  tokens look at earlier tokens
    x = x + feed_forward->forward(ffn_norm->forward(x));     // (B, T, d)  each token alone: d → F → d
    return x;
}

Tensor LlamaBlock::forward_cached(Tensor x, nn::KVCache& cache) const {
    x = x + attention->forward_cached(attention_norm->forward(x), cache);  // (B, t, d)
    x = x + feed_forward->forward(ffn_norm->forward(x));                   // (B, t, d)
    return x;
}

static GPTConfig checked_llama(const GPTConfig& c) {
    check_config(c, "Llama");
    check(c.arch == "llama", "Llama", "arch '{}' is not llama", c.arch);
    return c;
}

Llama::Llama(const GPTConfig& config) : LanguageModel(checked_llama(config)) {
    const GPTConfig& c = config_;
    tok_embeddings = register_module("tok_embeddings", std::make_shared<nn::Embedding>(
                                                           c.vocab, c.d, nn::EmbeddingOptions().sparse(c.sparse_embedding)));
    layers = register_module("layers", std::make_shared<nn::ModuleList<LlamaBlock>>());
    for (std::int64_t i = 0; i < c.n_layer; ++i) layers->push_back(std::make_shared<LlamaBlock>(c));
    norm = register_module("norm", std::make_shared<nn::RMSNorm>(c.d, kNormEps));
    output = register_module("output", std::make_shared<nn::Linear>(c.d, c.vocab, /*bias=*/false));
    if (c.tie) nn::tie_weights(*output, *tok_embeddings);  // one (V, d) parameter

    init_gpt2("norm", {"wo.weight", "w2.weight"});  // the projections into the residual stream; RMSNorm keeps 1
}

Tensor Llama::trunk(const IndexTensor& idx, std::int64_t n_layers) const {
    check_window(idx, 0, "Llama");
    Tensor x = F::dropout(tok_embeddings->forward(idx), config_.dropout, is_training());  // (B, T, d)
    for (std::int64_t i = 0; i < n_layers; ++i) x = run_block(std::size_t(i), (*layers)[std::size_t(i)], x);
    return x;
}

Tensor Llama::forward(const IndexTensor& idx) const {
    return output->forward(norm->forward(trunk(idx, config_.n_layer)));  // (B, T, V)
}

Tensor Llama::forward_cached(const IndexTensor& idx, std::vector<nn::KVCache>& caches) const {
    cached_positions(idx, caches, "Llama");
    NoGradGuard no_grad;
    Tensor x = tok_embeddings->forward(idx);  // (B, t, d); the positions enter as rope's angles
    for (std::size_t i = 0; i < caches.size(); ++i) x = (*layers)[i]->forward_cached(x, caches[i]);
    return output->forward(norm->forward(x));  // (B, t, V)
}

Tensor Llama::attention_weights(const IndexTensor& idx, std::int64_t layer) const {
    check(layer >= 0 && layer < config_.n_layer, "Llama", "layer {} is outside [0, {})", layer, config_.n_layer);
    NoGradGuard no_grad;
    const Tensor x = trunk(idx, layer);
    const LlamaBlock& b = *(*layers)[std::size_t(layer)];
    return b.attention->attention_weights(b.attention_norm->forward(x));  // (B, H, T, T)
}

}  // namespace gpt
