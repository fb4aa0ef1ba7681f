// nn/attention.hpp — multi-head causal self-attention, the module (nanoGPT's, with LLaMA's
// grouped-query attention). Its forward picks one of the kernels of nn/attention/, in plain sight:
//   composed.hpp  scaled_dot_product_attention from core ops: the lesson and the oracle
//   fused.hpp     fused_causal_attention: one op with its own backward
//   tiled.hpp     tiled_causal_attention: FlashAttention-2's tiles, for long sequences
//   cached.hpp    cached_causal_attention: generation against a KVCache (nn/kv_cache.hpp)
// Legend: B batch, H heads, T time, hd head width, d model width (d = H·hd), Hkv key/value heads
// (dividing H), g = H / Hkv. Masks (0/1, 1 = may attend) and how a hidden key stays hidden in
// every kernel: README.md, "The mask convention".
// ref: Vaswani et al. 2017, §3.2; nanoGPT model.py, CausalSelfAttention; Meta's llama model.py.
#pragma once

#include <cstdint>
#include <memory>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/nn/attention/composed.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// LibTorch's style: setters chain, CausalSelfAttentionOptions().n_kv_head(2).rope(true); a getter
// of the same name reads each (the defaults are below).
class CausalSelfAttentionOptions {
public:
    CausalSelfAttentionOptions& dropout(double v) { dropout_ = v; return *this; }
    CausalSelfAttentionOptions& bias(bool v) { bias_ = v; return *this; }
    CausalSelfAttentionOptions& rope(bool v) { rope_ = v; return *this; }
    CausalSelfAttentionOptions& n_kv_head(std::int64_t v) { n_kv_head_ = v; return *this; }
    CausalSelfAttentionOptions& fast_kernels(bool v) { fast_kernels_ = v; return *this; }
    CausalSelfAttentionOptions& llama_names(bool v) { llama_names_ = v; return *this; }

    double dropout() const { return dropout_; }  // attn_ and resid_dropout, training only; [0, 1)
    bool bias() const { return bias_; }           // the projections have biases
    bool rope() const { return rope_; }           // rotate q and k by their positions (apply_rotary)
    std::int64_t n_kv_head() const { return n_kv_head_; }  // K/V heads, dividing n_head; 0 = n_head
    bool fast_kernels() const { return fast_kernels_; }  // nanoGPT's flash: fused or tiled where exact
    bool llama_names() const { return llama_names_; }  // wq, wk, wv, wo (Meta's) for c_attn, c_proj

private:
    double dropout_ = 0.0;
    bool bias_ = true;
    bool rope_ = false;
    std::int64_t n_kv_head_ = 0;
    bool fast_kernels_ = true;
    bool llama_names_ = false;
};

// Multi-head causal self-attention, as nanoGPT's, with grouped-query attention as LLaMA's:
//     q (B, T, d), k, v (B, T, Hkv·hd) = the projections of x (B, T, d)
//     q (B, H, T, hd), k, v (B, Hkv, T, hd) = reshape (B, T, heads, hd), transpose(1, 2)
//     q, k                     = apply_rotary(q, k, positions 0..T-1)   if options.rope()
//     k, v (B, H, T, hd)       = each K/V head repeated for its g = H / Hkv query heads (Hkv < H)
//     y (B, H, T, hd)          = causal attention of q, k, v [and attn_mask]: with fast_kernels, no
//                                attn_mask and no dropout (p = 0, or eval()), tiled_causal_attention for T ≥
//                                kTiledFromT, fused_causal_attention below; else composed.
//                                Below kTiledFromT with c_attn, no rope and Hkv = H, the fused
//                                kernel reads the heads in place: fused_causal_attention_packed
//                                on c_attn's output, y (B, T, d), no split or merge copied
//     out (B, T, d)            = the output projection of y transposed back to (B, T, H, hd), (B, T, d)
// Hkv = H is multi-head attention, Hkv = 1 multi-query (Shazeer 2019), between grouped-query
// (Ainslie et al. 2023): the K/V projections and the KV cache shrink by g.
// Parameters, with e = Hkv·hd (e = d when Hkv = H):
//   nanoGPT's names and layouts (the default), so its checkpoints load by name:
//     c_attn.weight (d + 2e, d) = [q | k | v] rows, c_attn.bias (d + 2e), c_proj.weight (d, d), c_proj.bias (d)
//   options.llama_names(true), Meta's LLaMA names (facebookresearch/llama model.py, Attention):
//     wq.weight (d, d), wk.weight (e, d), wv.weight (e, d), wo.weight (d, d) [and .bias if bias()]
class CausalSelfAttention : public Module {
public:
    // Throws ValueError if d or n_head is not positive, d is not a multiple of n_head, 3d² passes 2^60
    // (the projections' weights), n_kv_head is negative or does not divide n_head, the head width is
    // odd while rope is on, or options.dropout() is outside [0, 1).
    CausalSelfAttention(std::int64_t d, std::int64_t n_head, CausalSelfAttentionOptions options = {});

    // From this many positions on, forward's fast path is the tiled kernel (nn/attention.cpp says why).
    static constexpr std::int64_t kTiledFromT = 256;

    // x (B, T, d) → (B, T, d), empty for B = 0 or T = 0. attn_mask: undefined, or 0/1 broadcasting to
    // (B, H, T, T), ANDed with causality (a mask hiding every query's own position is warned about
    // once: composed.hpp). Throws ValueError if x is not (B, T, d) or the mask does not fit.
    Tensor forward(const Tensor& x, const Tensor& attn_mask = Tensor()) const;

    // Generation: x (B, t, d) holds the positions P .. P + t − 1 that follow the P = cache.length()
    // already in the cache. Appends their k and v (rotated by their absolute positions with rope)
    // and attends over all P + t: out (B, t, d) equals the last t rows of forward() on the whole
    // sequence. Opens its own NoGradGuard, so records no graph; run the rest of a generation step
    // under one too. The cache holds Hkv heads only. t = 0 appends nothing and gives (B, 0, d).
    // Throws ValueError for x not (B, t, d) with B >= 1, P + t above cache.max_len(), a cache of other sizes,
    // or dropout > 0 in training mode (call eval() first).
    Tensor forward_cached(const Tensor& x, KVCache& cache) const;

    // The softmax weights of every head, (B, H, T, T), with no graph and no dropout (heatmaps).
    Tensor attention_weights(const Tensor& x, const Tensor& attn_mask = Tensor()) const;

    std::int64_t d() const { return d_; }
    std::int64_t n_head() const { return n_head_; }
    std::int64_t n_kv_head() const { return n_kv_head_; }

    std::shared_ptr<Linear> c_attn;  // (d → d + 2e): [q | k | v] along the last dim; null with llama_names
    std::shared_ptr<Linear> c_proj;  // (d → d); null with llama_names
    std::shared_ptr<Linear> wq, wk, wv, wo;  // (d → d), (d → e), (d → e), (d → d); null without llama_names

private:
    struct Heads {
        Tensor q;     // (B, H, T, hd)
        Tensor k, v;  // (B, Hkv, T, hd)
    };
    void check_input(const Tensor& x) const;  // x (B, T, d), else ValueError
    Heads split_heads(const Tensor& x, std::int64_t first_position) const;
    Tensor merge_heads(const Tensor& y, std::int64_t B, std::int64_t T) const;  // (B, H, T, hd) → out (B, T, d)
    Tensor repeat_kv(const Tensor& t) const;  // (B, Hkv, T, hd) → (B, H, T, hd)
    Tensor combined_mask(const Tensor& x, const Tensor& attn_mask) const;  // checked, ANDed with causality

    std::int64_t d_, n_head_, n_kv_head_;
    CausalSelfAttentionOptions options_;
};

}  // namespace xgrad::nn
