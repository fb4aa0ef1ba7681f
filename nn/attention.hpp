// nn/attention.hpp — scaled dot-product attention and causal self-attention (one chapter).
//
//   functional::scaled_dot_product_attention   composed from core ops: the lesson and the oracle
//   functional::attention_weights              the softmax weights alone, for inspection
//   CausalSelfAttention                        nanoGPT's module (with LLaMA's grouped-query
//                                              attention); forward picks a kernel where that is
//                                              exact (below), forward_cached generates
// Legend: B batch, H heads, T time, Tq queries, Tk keys, hd head width, hv value width,
// d model width (d = H·hd), Hkv key/value heads (dividing H), g = H / Hkv.
//
// Masks (no bool dtype): attn_mask holds 1 = may attend (PyTorch's True) or 0 = may not, and
// broadcasts to (..., Tq, Tk); other values throw ValueError. A fully masked query gets weights 0,
// so output 0 and zero gradients, never NaN (as PyTorch >= 2.5). The two conventions, as PyTorch's:
//   masked_fill(x, mask, v)   FILLS where mask = 1   future mask: triu(ones({T, T}), 1)
//   attn_mask                 KEEPS where mask = 1   causal_mask(Tq, Tk) = tril(ones({Tq, Tk}))
// so masked_fill(scores, eq(causal_mask(T, T), 0), -inf) is the causal softmax's input. A mask of
// rank 0 or 1 broadcasts as PyTorch's (a 1-D mask is one row of keys).
//
// Hidden keys stay hidden, in every path. A query's output and every gradient it sends back are
// sums over the keys it may see only, so a NaN or inf in a masked or future k or v reaches no
// row that may not see it; a row that does see it gives NaN, as PyTorch's. A plain matmul cannot
// promise this: weights · v adds 0 · v[j] for a hidden j, and 0 · NaN = NaN. So:
//   scaled_dot_product_attention, attention_weights: with a mask, scores = sampled_matmul and
//     out = masked_matmul (core/masked_matmul.hpp), which never pair a query with a hidden key
//     (unmasked, they are matmul);
//   fused_causal_attention, tiled_causal_attention: every product sums over j ≤ i only;
//   CausalSelfAttention::forward: with options.fused, no attn_mask and no dropout, the tiled
//     kernel for T ≥ kTiledFromT and the fused one below; else scaled_dot_product_attention.
// ref: Vaswani et al. 2017, "Attention Is All You Need", §3.2; PyTorch docs,
//      torch.nn.functional.scaled_dot_product_attention; nanoGPT model.py, CausalSelfAttention.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {
namespace functional {

namespace detail {
// The sizes of one attention call: q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv).
struct AttentionSizes {
    ArrayShape lead;  // the leading dims "..."
    std::size_t Tq = 0, Tk = 0, hd = 0, hv = 0;
};
// Checks q, k and v (v may be null) as scaled_dot_product_attention documents; op names the caller.
AttentionSizes check_qkv(const Tensor& q, const Tensor& k, const Tensor* v, const char* op);
}  // namespace detail

// Scaled dot-product attention, composed from core ops (each step's backward is the op's own):
//     scores  (..., Tq, Tk) = q (..., Tq, hd) · kᵀ (..., hd, Tk) · scale
//     weights (..., Tq, Tk) = softmax(scores with -inf where a key is masked, over Tk)
//     out     (..., Tq, hv) = dropout(weights, dropout_p) · v (..., Tk, hv)
//   q, k, v: the same leading dims ..., usually (B, H), possibly none; real.
//   attn_mask: undefined, or 0/1 broadcasting to (..., Tq, Tk) (see the top).
//   is_causal: query i attends to keys 0..i only (top-left aligned, as PyTorch); not with attn_mask.
//   dropout_p: applied whenever p > 0 (inverted), as PyTorch's: pass 0 at evaluation.
//   scale: defaults to 1/√hd.
// Throws ValueError for: ranks below 2 or unequal; leading dims that differ; q and k of different
// hd; k and v of different Tk; hd = 0; a mask that does not broadcast or holds other than 0 and 1;
// a mask with is_causal; dropout_p outside [0, 1].
// ref: PyTorch docs, torch.nn.functional.scaled_dot_product_attention (its reference code).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), bool is_causal = false,
                                    double dropout_p = 0.0, std::optional<double> scale = std::nullopt);

// weights (..., Tq, Tk) of the same computation, before dropout (rows sum to 1, or 0 when fully
// masked). Differentiable; arguments and errors as scaled_dot_product_attention.
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask = Tensor(),
                         bool is_causal = false, std::optional<double> scale = std::nullopt);

// The causal keep-mask (Tq, Tk) for attn_mask: 1 where key j may be attended by query i (j ≤ i),
// 0 above the diagonal; = tril(ones({Tq, Tk})), top-left aligned as is_causal (and PyTorch's) for
// Tq ≠ Tk. sdpa(q, k, v, causal_mask(Tq, Tk)) equals sdpa(q, k, v, {}, true). No gradient.
// Throws ValueError for a negative size.
Tensor causal_mask(std::int64_t Tq, std::int64_t Tk);

}  // namespace functional

struct CausalSelfAttentionOptions {
    double dropout = 0.0;        // nanoGPT's attn_dropout and resid_dropout, training mode only; [0, 1)
    bool bias = true;            // the projections have biases
    bool rope = false;           // rotate q and k by their positions (apply_rotary, Su et al. 2021)
    bool fused = true;           // nanoGPT's self.flash: the fused or tiled kernel where exact
    std::int64_t n_kv_head = 0;  // K/V heads, dividing n_head (grouped-query attention); 0 = n_head
    bool separate = false;       // wq, wk, wv, wo (Meta's LLaMA) instead of c_attn, c_proj (nanoGPT)

    CausalSelfAttentionOptions& set_dropout(double p) { dropout = p; return *this; }
    CausalSelfAttentionOptions& set_bias(bool b) { bias = b; return *this; }
    CausalSelfAttentionOptions& set_rope(bool r) { rope = r; return *this; }
    CausalSelfAttentionOptions& set_fused(bool f) { fused = f; return *this; }
    CausalSelfAttentionOptions& set_n_kv_head(std::int64_t n) { n_kv_head = n; return *this; }
    CausalSelfAttentionOptions& set_separate(bool s) { separate = s; return *this; }
};

// Multi-head causal self-attention, as nanoGPT's, with grouped-query attention as LLaMA's:
//     q (B, T, d), k, v (B, T, Hkv·hd) = the projections of x (B, T, d)
//     q (B, H, T, hd), k, v (B, Hkv, T, hd) = reshape (B, T, heads, hd), transpose(1, 2)
//     q, k                     = apply_rotary(q, k, positions 0..T-1)   if options.rope
//     k, v (B, H, T, hd)       = each K/V head repeated for its g = H / Hkv query heads (Hkv < H)
//     y (B, H, T, hd)          = causal attention of q, k, v [and attn_mask]: if options.fused, no
//                                attn_mask and no dropout, tiled_causal_attention for T ≥
//                                kTiledFromT, fused_causal_attention below; else composed
//     out (B, T, d)            = the output projection of y transposed back to (B, T, H, hd), (B, T, d)
// Hkv = H is multi-head attention, Hkv = 1 multi-query (Shazeer 2019), between grouped-query
// (Ainslie et al. 2023): the K/V projections and the KV cache shrink by g.
// Parameters, with e = Hkv·hd (e = d when Hkv = H):
//   nanoGPT's names and layouts (the default), so its checkpoints load by name:
//     c_attn.weight (d + 2e, d) = [q | k | v] rows, c_attn.bias (d + 2e), c_proj.weight (d, d), c_proj.bias (d)
//   options.separate, Meta's LLaMA names (facebookresearch/llama model.py, Attention):
//     wq.weight (d, d), wk.weight (e, d), wv.weight (e, d), wo.weight (d, d) [and .bias if options.bias]
class CausalSelfAttention : public Module {
public:
    // Throws ValueError if d or n_head is not positive, d is not a multiple of n_head, n_kv_head is
    // negative or does not divide n_head, the head width is odd while rope is on, or
    // options.dropout is outside [0, 1).
    CausalSelfAttention(std::int64_t d, std::int64_t n_head, CausalSelfAttentionOptions options = {});

    // From this many positions on, forward's fast path is the tiled kernel (attention.cpp says why).
    static constexpr std::int64_t kTiledFromT = 256;

    // x (B, T, d) → (B, T, d). attn_mask: undefined, or 0/1 broadcasting to (B, H, T, T), ANDed
    // with causality. Throws ValueError if x is not (B, T, d) or the mask does not fit.
    Tensor forward(const Tensor& x, const Tensor& attn_mask = Tensor()) const;

    // Generation: x (B, t, d) holds the positions P .. P + t − 1 that follow the P = cache.length()
    // already in the cache. Appends their k and v (rotated by their absolute positions with rope)
    // and attends over all P + t: out (B, t, d) equals the last t rows of forward() on the whole
    // sequence. Opens its own NoGradGuard, so records no graph; run the rest of a generation step
    // under one too. The cache holds Hkv heads only.
    // Throws ValueError for x not (B, t, d), P + t above cache.max_len(), a cache of other sizes,
    // or dropout > 0 in training mode (call eval() first).
    Tensor forward_cached(const Tensor& x, KVCache& cache) const;

    // The softmax weights of every head, (B, H, T, T), with no graph and no dropout (heatmaps).
    Tensor attention_weights(const Tensor& x, const Tensor& attn_mask = Tensor()) const;

    std::int64_t d() const { return d_; }
    std::int64_t n_head() const { return n_head_; }
    std::int64_t n_kv_head() const { return n_kv_head_; }

    std::shared_ptr<Linear> c_attn;  // (d → d + 2e): [q | k | v] along the last dim; null if separate
    std::shared_ptr<Linear> c_proj;  // (d → d); null if separate
    std::shared_ptr<Linear> wq, wk, wv, wo;  // (d → d), (d → e), (d → e), (d → d); null unless separate

private:
    struct Heads {
        Tensor q;     // (B, H, T, hd)
        Tensor k, v;  // (B, Hkv, T, hd)
    };
    Heads split_heads(const Tensor& x, std::int64_t first_position) const;
    Tensor merge_heads(const Tensor& y, std::int64_t B, std::int64_t T) const;  // (B, H, T, hd) → out (B, T, d)
    Tensor repeat_kv(const Tensor& t) const;  // (B, Hkv, T, hd) → (B, H, T, hd)
    Tensor combined_mask(std::size_t T, const Tensor& attn_mask) const;

    std::int64_t d_, n_head_, n_kv_head_;
    CausalSelfAttentionOptions options_;
};

}  // namespace xgrad::nn
