// nn/attention.cpp — CausalSelfAttention: the heads split, attended by a kernel picked in plain
// sight (the composed lesson, or the fused or tiled kernel where exact), and merged again; or, on
// the fused kernel's packed form, attended where c_attn left them, with no split or merge.
// Legend as in nn/attention.hpp; the kernels are in nn/attention/.
#include <xgrad/nn/attention.hpp>

#include <vector>

#include <xgrad/core/shape.hpp>
#include <xgrad/core/slicing.hpp>
#include <xgrad/nn/attention/cached.hpp>
#include <xgrad/nn/attention/composed.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include <xgrad/nn/attention/tiled.hpp>
#include <xgrad/nn/dropout.hpp>
#include <xgrad/nn/positional.hpp>

namespace xgrad::nn {

// ---- CausalSelfAttention --------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(std::int64_t d, std::int64_t n_head, CausalSelfAttentionOptions options)
    : d_(d), n_head_(n_head), n_kv_head_(options.n_kv_head() == 0 ? n_head : options.n_kv_head()), options_(options) {
    const char* op = "CausalSelfAttention";
    check(d > 0 && n_head > 0, op, "d and n_head must be positive; got d {}, n_head {}", d, n_head);
    check(d % n_head == 0, op, "d ({}) must be a multiple of n_head ({})", d, n_head);
    // The projections hold at most 3d² weights ((d + 2e, d) with e ≤ d): checked before d + 2e is computed
    check(std::uint64_t(d) <= kMaxNumel / 3 / std::uint64_t(d), op,
          "d = {} is too large: the projections' (d + 2e, d) weights would hold more than 2^60 elements", d);
    check(n_kv_head_ > 0 && n_head % n_kv_head_ == 0, op,
          "n_kv_head ({}) must divide n_head ({}): 1 is multi-query, n_head (or 0) multi-head", options.n_kv_head(),
          n_head);
    check(!options.rope() || (d / n_head) % 2 == 0, op,
          "rope rotates pairs of features: the head width d / n_head = {} must be even", d / n_head);
    check(options.dropout() >= 0 && options.dropout() < 1, op, "dropout must be in [0, 1); got {}", options.dropout());
    const std::int64_t e = n_kv_head_ * (d / n_head);  // the width of k and of v
    if (options.llama_names()) {
        wq = register_module("wq", std::make_shared<Linear>(d, d, options.bias()));
        wk = register_module("wk", std::make_shared<Linear>(d, e, options.bias()));
        wv = register_module("wv", std::make_shared<Linear>(d, e, options.bias()));
        wo = register_module("wo", std::make_shared<Linear>(d, d, options.bias()));
    } else {
        c_attn = register_module("c_attn", std::make_shared<Linear>(d, d + 2 * e, options.bias()));
        c_proj = register_module("c_proj", std::make_shared<Linear>(d, d, options.bias()));
    }
}

void CausalSelfAttention::check_input(const Tensor& x) const {
    check(x.defined() && x.dim() == 3 && x.size(-1) == d_, "CausalSelfAttention",
          "x must be (B, T, d) with d = {}; got {}", d_, x.defined() ? shape_str(x.shape()) : "undefined");
}

CausalSelfAttention::Heads CausalSelfAttention::split_heads(const Tensor& x, std::int64_t first_position) const {
    check_input(x);
    const auto B = std::int64_t(x.size(0)), T = std::int64_t(x.size(1)), hd = d_ / n_head_;
    const std::int64_t e = n_kv_head_ * hd;
    Tensor q, k, v;  // (B, T, d), (B, T, e), (B, T, e)
    if (options_.llama_names()) {
        q = wq->forward(x), k = wk->forward(x), v = wv->forward(x);
    } else {
        // qkv (B, T, d + 2e) = x (B, T, d) · c_attn.weightᵀ + c_attn.bias: [q | k | v] on the last dim
        const Tensor qkv = c_attn->forward(x);
        q = narrow(qkv, -1, 0, d_), k = narrow(qkv, -1, d_, e), v = narrow(qkv, -1, d_ + e, e);
    }
    // (B, T, heads·hd) → (B, T, heads, hd) → (B, heads, T, hd): head h owns features h·hd .. (h+1)·hd - 1
    auto heads = [&](const Tensor& t, std::int64_t n) { return t.reshape({B, T, n, hd}).transpose(1, 2); };
    Heads h{heads(q, n_head_), heads(k, n_kv_head_), heads(v, n_kv_head_)};
    if (options_.rope()) {
        // q, k rotated by their absolute positions, so q_t·k_s depends on t - s only
        const IndexTensor positions = IndexTensor::arange(first_position, first_position + T);
        h.q = apply_rotary(h.q, positions);
        h.k = apply_rotary(h.k, positions);
    }
    return h;
}

// (B, Hkv, T, hd) → (B, Hkv, 1, T, hd) → g copies side by side (B, Hkv, g, T, hd) → (B, H, T, hd):
// query head h = kv·g + r gets K/V head kv (Meta's repeat_kv). concat's backward sums the g copies'
// gradients back into the one K/V head.
Tensor CausalSelfAttention::repeat_kv(const Tensor& t) const {
    const std::int64_t g = n_head_ / n_kv_head_;
    if (g == 1) return t;
    const auto B = std::int64_t(t.size(0)), T = std::int64_t(t.size(2)), hd = std::int64_t(t.size(3));
    const Tensor one = t.reshape({B, n_kv_head_, 1, T, hd});
    return concat(std::vector<Tensor>(std::size_t(g), one), 2).reshape({B, n_head_, T, hd});
}

Tensor CausalSelfAttention::merge_heads(const Tensor& y, std::int64_t B, std::int64_t T) const {
    // (B, H, T, hd) → (B, T, H, hd) → (B, T, d): the heads side by side again, then the output projection
    const Tensor heads = y.transpose(1, 2).reshape({B, T, d_});
    return options_.llama_names() ? wo->forward(heads) : c_proj->forward(heads);
}

// keep (B or 1, H or 1, T, T) = attn_mask · causal_mask(T, T): both must allow a pair.
Tensor CausalSelfAttention::combined_mask(const Tensor& x, const Tensor& attn_mask) const {
    const std::size_t B = x.size(0), T = x.size(1);
    functional::detail::check_mask(attn_mask, {B, std::size_t(n_head_), T, T}, "CausalSelfAttention");
    return attn_mask * functional::causal_mask(std::int64_t(T), std::int64_t(T));
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& attn_mask) const {
    const double p = is_training() ? options_.dropout() : 0.0;
    // As nanoGPT's `if self.flash:`, a fast kernel where it is exactly the composed function: no
    // attn_mask and no dropout.
    const bool fast = options_.fast_kernels() && !attn_mask.defined() && p == 0;
    if (fast && c_attn && !options_.rope() && n_kv_head_ == n_head_ && x.defined() && x.dim() == 3 &&
        std::int64_t(x.size(1)) < kTiledFromT) {
        // The fused kernel on c_attn's output as it stands: it reads head h's q, k and v at their
        // columns of qkv (B, T, 3d) and writes y (B, T, d) with the heads side by side, so nothing
        // is copied to split the heads (narrow, reshape, transpose below) or to merge them, in
        // either pass. The same sums as the split, fused_causal_attention and the merge. (p = 0
        // here, so the output dropout below would be the identity.)
        check_input(x);
        return c_proj->forward(functional::fused_causal_attention_packed(c_attn->forward(x), n_head_));
    }
    Heads h = split_heads(x, 0);
    const auto B = std::int64_t(x.size(0)), T = std::int64_t(x.size(1));
    h.k = repeat_kv(h.k), h.v = repeat_kv(h.v);  // (B, H, T, hd): one K/V head per query head
    // y (B, H, T, hd) = causal attention of each head
    Tensor y;
    if (!fast && !attn_mask.defined()) {  // the lesson: composed from core ops (nn/attention/composed.cpp)
        y = functional::scaled_dot_product_attention(h.q, h.k, h.v, Tensor(), /*is_causal=*/true, p);
    } else if (!fast) {
        y = functional::scaled_dot_product_attention(h.q, h.k, h.v, combined_mask(x, attn_mask),
                                                     /*is_causal=*/false, p);
    } else if (T < kTiledFromT) {
        y = functional::fused_causal_attention(h.q, h.k, h.v);
    } else {
        // Tiled for T ≥ kTiledFromT: the fused kernel's (T, T) weights outgrow the cache, while for
        // short T recomputing them costs more than it saves.
        y = functional::tiled_causal_attention(h.q, h.k, h.v);
    }
    // out (B, T, d), then dropout on the output (nanoGPT's resid_dropout)
    return functional::dropout(merge_heads(y, B, T), p, is_training());
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache& cache) const {
    check(!(is_training() && options_.dropout() > 0), "CausalSelfAttention",
          "forward_cached does not apply dropout ({}): call eval() before generating", options_.dropout());
    NoGradGuard no_grad;
    const Heads h = split_heads(x, cache.length());  // positions P .. P + t - 1
    const auto B = std::int64_t(x.size(0)), t = std::int64_t(x.size(1));
    check(B > 0, "CausalSelfAttention::forward_cached", "x is {}: a KVCache holds B >= 1 sequences",
          shape_str(x.shape()));
    if (t == 0) return merge_heads(h.q, B, 0);      // no new positions: none to append, out (B, 0, d)
    cache.append(h.k.data(), h.v.data());           // the cache now holds positions 0 .. P + t - 1
    // y (B, H, t, hd): each new query over the cached keys up to its own position, the g query heads
    // of a group reading their one K/V head in place (nn/attention/cached.cpp)
    const Tensor y = functional::cached_causal_attention(h.q, cache);
    return merge_heads(y, B, t);
}

Tensor CausalSelfAttention::attention_weights(const Tensor& x, const Tensor& attn_mask) const {
    NoGradGuard no_grad;
    Heads h = split_heads(x, 0);
    h.k = repeat_kv(h.k);
    if (!attn_mask.defined()) return functional::attention_weights(h.q, h.k, Tensor(), /*is_causal=*/true);
    return functional::attention_weights(h.q, h.k, combined_mask(x, attn_mask));
}

}  // namespace xgrad::nn
