// nn/attention.cpp — attention, step by step, composed from core ops; and the module.
// Legend as in nn/attention.hpp; "..." is any number of leading dims (usually (B, H)).
//
// scaled_dot_product_attention has no backward of its own: every step is a gradchecked core op.
// It is the fused and the tiled kernels' oracle; CausalSelfAttention::forward alone picks them.
//
// The lesson in one picture, for one head of a sequence of T = 3 tokens with causal masking:
//
//     scores = q·kᵀ/√hd          masked (above the diagonal → -inf)     softmax over each row
//     [s00 s01 s02]              [s00 -inf -inf]                         [1    0    0  ]
//     [s10 s11 s12]     →        [s10 s11  -inf]               →         [w10  w11  0  ]
//     [s20 s21 s22]              [s20 s21  s22 ]                         [w20  w21  w22]
//
// and output row t = Σ_j weights[t, j] · v[j]: a weighted average of the values that token t
// may see.
#include <xgrad/nn/attention.hpp>

#include <cmath>
#include <limits>

#include <xgrad/nn/attention_fused.hpp>
#include <xgrad/nn/attention_tiled.hpp>
#include <xgrad/nn/dropout.hpp>
#include <xgrad/nn/positional.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/matmul.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/core/slicing.hpp>
#include <xgrad/core/masking.hpp>

namespace xgrad::nn {
namespace functional {

namespace detail {

AttentionSizes check_qkv(const Tensor& q, const Tensor& k, const Tensor* v, const char* op) {
    check(q.defined() && k.defined() && (!v || v->defined()), op, "q, k and v must be defined tensors");
    const ArrayShape sq = array_shape(q.data()), sk = array_shape(k.data());
    const ArrayShape sv = v ? array_shape(v->data()) : sk;
    check(sq.size() >= 2 && sq.size() == sk.size() && sq.size() == sv.size(), op,
          "q, k, v must have the same rank, at least 2 ((..., T, hd)); got q {}, k {}, v {}", shape_str(sq),
          shape_str(sk), shape_str(sv));
    const std::size_t n = sq.size();
    AttentionSizes s;
    s.lead.assign(sq.begin(), sq.end() - 2);
    s.Tq = sq[n - 2], s.hd = sq[n - 1], s.Tk = sk[n - 2], s.hv = sv[n - 1];
    check(ArrayShape(sk.begin(), sk.end() - 2) == s.lead && ArrayShape(sv.begin(), sv.end() - 2) == s.lead, op,
          "q, k, v must share their leading dims (...); got q {}, k {}, v {}", shape_str(sq), shape_str(sk),
          shape_str(sv));
    check(sk[n - 1] == s.hd, op, "q and k must have the same head width hd; got q {} and k {}", shape_str(sq),
          shape_str(sk));
    check(sv[n - 2] == s.Tk, op, "k and v must have the same number of keys Tk; got k {} and v {}",
          shape_str(sk), shape_str(sv));
    check(s.hd > 0, op, "the head width hd must be positive; got q {}", shape_str(sq));
    check(s.Tk > 0, op, "there must be at least one key; got k {}", shape_str(sk));
    return s;
}

}  // namespace detail

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";
using detail::AttentionSizes;

// attn_mask must broadcast to `target` (..., Tq, Tk) and hold only the values 0 and 1.
void check_mask(const Tensor& mask, const ArrayShape& target, const char* op) {
    const ArrayShape sm = array_shape(mask.data());
    bool fits = sm.size() <= target.size();
    for (std::size_t i = 0; fits && i < sm.size(); ++i) {
        const std::size_t m = sm[sm.size() - 1 - i], t = target[target.size() - 1 - i];
        fits = m == t || m == 1;
    }
    check(fits, op, "attn_mask of shape {} does not broadcast to (..., Tq, Tk) = {}", shape_str(sm),
          shape_str(target));
    const real* p = mask.data().data();
    for (std::size_t i = 0; i < mask.data().size(); ++i) {
        check(p[i] == 0 || p[i] == 1, op,
              "attn_mask must hold 0 (may not attend) or 1 (may attend); found {} at flat index {}. "
              "An additive mask (0 / -inf) means the opposite: convert it with eq(mask, 0)",
              double(p[i]), i);
    }
}

ArrayShape scores_shape(const AttentionSizes& s) {
    ArrayShape out = s.lead;
    out.push_back(s.Tq);
    out.push_back(s.Tk);
    return out;
}

// keep (..., Tq, Tk) broadcastable, 1 where query i may attend key j; undefined when every key is
// visible. A mask of rank 0 or 1 is read as one row (1, Tk) or (1, 1), broadcast as PyTorch's.
Tensor keep_of(const AttentionSizes& s, const Tensor& attn_mask, bool is_causal) {
    check(!(is_causal && attn_mask.defined()), kSdpa,
          "give attn_mask or is_causal, not both (as PyTorch); to combine them pass "
          "attn_mask * causal_mask(Tq, Tk) with is_causal = false");
    if (is_causal) return causal_mask(std::int64_t(s.Tq), std::int64_t(s.Tk));
    if (!attn_mask.defined()) return Tensor();
    check_mask(attn_mask, scores_shape(s), kSdpa);
    if (attn_mask.dim() >= 2) return attn_mask;
    return attn_mask.reshape({1, attn_mask.dim() == 0 ? std::int64_t(1) : std::int64_t(attn_mask.size(0))});
}

// The steps up to the softmax weights, shared by both public functions. The sizes are checked.
Tensor masked_softmax_weights(const Tensor& q, const Tensor& k, const AttentionSizes& s, const Tensor& keep,
                              std::optional<double> scale) {
    const real factor = static_cast<real>(scale.value_or(1.0 / std::sqrt(double(s.hd))));
    if (!keep.defined()) {
        // scores (..., Tq, Tk) = q (..., Tq, hd) · kᵀ (..., hd, Tk) · scale
        // Entry [i, j] is how well query i matches key j; the 1/√hd keeps its variance near 1 when
        // q and k have unit-variance entries, so the softmax does not saturate (Vaswani §3.2.1).
        Tensor scores = matmul(q, transpose(k, -2, -1)) * factor;
        // weights (..., Tq, Tk) = softmax over the keys: each row is ≥ 0 and sums to 1.
        return softmax(scores, -1);
    }
    // The same scores, formed only where keep = 1 (0 elsewhere): sampled_matmul never multiplies
    // query i by a key it may not see, in the forward or the backward, so a NaN there stays there.
    Tensor scores = sampled_matmul(q, transpose(k, -2, -1), keep) * factor;
    // scores (..., Tq, Tk), -inf where keep = 0: e^-inf = 0, so those keys get weight 0
    scores = masked_fill(scores, eq(keep, 0), -std::numeric_limits<real>::infinity());

    // A query with no key left has a row of -inf, whose softmax is 0/0 = NaN. As PyTorch ≥ 2.5,
    // the row is refilled with 0 before the softmax and its weights set to 0 after it; masked_fill
    // passes no gradient through filled entries, so the row sends exactly 0 back to q and k.
    // empty (..., Tq, 1) = [Σ_j keep[..., i, j] = 0]
    const Tensor empty = eq(sum(keep, -1, /*keepdim=*/true), 0);
    bool any_empty = false;
    for (real e : empty.data()) any_empty = any_empty || e != 0;
    if (!any_empty) return softmax(scores, -1);
    scores = masked_fill(scores, empty, 0);
    return masked_fill(softmax(scores, -1), empty, 0);
}

}  // namespace

Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal,
                         std::optional<double> scale) {
    const AttentionSizes s = detail::check_qkv(q, k, nullptr, kSdpa);
    return masked_softmax_weights(q, k, s, keep_of(s, attn_mask, is_causal), scale);
}

// ---- scaled_dot_product_attention -------------------------------------------------------
// out (..., Tq, hv) = dropout(softmax(mask(q·kᵀ·scale))) · v, each step a core op.
// ref: Vaswani et al. 2017, eq. (1); PyTorch docs, torch.nn.functional.scaled_dot_product_attention
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, double dropout_p, std::optional<double> scale) {
    const AttentionSizes s = detail::check_qkv(q, k, &v, kSdpa);
    check(dropout_p >= 0 && dropout_p <= 1, kSdpa, "dropout_p must be in [0, 1]; got {}", dropout_p);
    const Tensor keep = keep_of(s, attn_mask, is_causal);
    // weights (..., Tq, Tk): rows sum to 1 (or are 0 where every key is masked)
    Tensor weights = masked_softmax_weights(q, k, s, keep, scale);
    // dropout on the weights (inverted: the kept ones are scaled by 1/(1 - p))
    if (dropout_p > 0) weights = dropout(weights, dropout_p, /*training=*/true);
    // out (..., Tq, hv) = weights (..., Tq, Tk) · v (..., Tk, hv): row i averages the values.
    // With a mask, row i sums only the values it may see: a matmul would also add 0 · v[j] for a
    // hidden key j, and 0 · NaN = NaN would carry a future NaN into every earlier row.
    if (!keep.defined()) return matmul(weights, v);
    return masked_matmul(weights, v, keep);
}

// keep (Tq, Tk) = tril(ones): row i keeps keys 0..i (top-left, as PyTorch's is_causal builds it)
Tensor causal_mask(std::int64_t Tq, std::int64_t Tk) {
    check(Tq >= 0 && Tk >= 0, "causal_mask", "sizes must be >= 0; got ({}, {})", Tq, Tk);
    return tril(ones({Tq, Tk}));
}

}  // namespace functional

// ---- CausalSelfAttention --------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(std::int64_t d, std::int64_t n_head, CausalSelfAttentionOptions options)
    : d_(d), n_head_(n_head), n_kv_head_(options.n_kv_head == 0 ? n_head : options.n_kv_head), options_(options) {
    const char* op = "CausalSelfAttention";
    check(d > 0 && n_head > 0, op, "d and n_head must be positive; got d {}, n_head {}", d, n_head);
    check(d % n_head == 0, op, "d ({}) must be a multiple of n_head ({})", d, n_head);
    check(n_kv_head_ > 0 && n_head % n_kv_head_ == 0, op,
          "n_kv_head ({}) must divide n_head ({}): 1 is multi-query, n_head (or 0) multi-head", options.n_kv_head,
          n_head);
    check(!options.rope || (d / n_head) % 2 == 0, op,
          "rope rotates pairs of features: the head width d / n_head = {} must be even", d / n_head);
    check(options.dropout >= 0 && options.dropout < 1, op, "dropout must be in [0, 1); got {}", options.dropout);
    const std::int64_t e = n_kv_head_ * (d / n_head);  // the width of k and of v
    if (options.separate) {
        wq = register_module("wq", std::make_shared<Linear>(d, d, options.bias));
        wk = register_module("wk", std::make_shared<Linear>(d, e, options.bias));
        wv = register_module("wv", std::make_shared<Linear>(d, e, options.bias));
        wo = register_module("wo", std::make_shared<Linear>(d, d, options.bias));
    } else {
        c_attn = register_module("c_attn", std::make_shared<Linear>(d, d + 2 * e, options.bias));
        c_proj = register_module("c_proj", std::make_shared<Linear>(d, d, options.bias));
    }
}

CausalSelfAttention::Heads CausalSelfAttention::split_heads(const Tensor& x, std::int64_t first_position) const {
    check(x.defined() && x.dim() == 3 && x.size(-1) == d_, "CausalSelfAttention",
          "x must be (B, T, d) with d = {}; got {}", d_, x.defined() ? shape_str(x.shape()) : "undefined");
    const auto B = std::int64_t(x.size(0)), T = std::int64_t(x.size(1)), hd = d_ / n_head_;
    const std::int64_t e = n_kv_head_ * hd;
    Tensor q, k, v;  // (B, T, d), (B, T, e), (B, T, e)
    if (options_.separate) {
        q = wq->forward(x), k = wk->forward(x), v = wv->forward(x);
    } else {
        // qkv (B, T, d + 2e) = x (B, T, d) · c_attn.weightᵀ + c_attn.bias: [q | k | v] on the last dim
        const Tensor qkv = c_attn->forward(x);
        q = narrow(qkv, -1, 0, d_), k = narrow(qkv, -1, d_, e), v = narrow(qkv, -1, d_ + e, e);
    }
    // (B, T, heads·hd) → (B, T, heads, hd) → (B, heads, T, hd): head h owns features h·hd .. (h+1)·hd - 1
    auto heads = [&](const Tensor& t, std::int64_t n) { return t.reshape({B, T, n, hd}).transpose(1, 2); };
    Heads h{heads(q, n_head_), heads(k, n_kv_head_), heads(v, n_kv_head_)};
    if (options_.rope) {
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
    return options_.separate ? wo->forward(heads) : c_proj->forward(heads);
}

// keep (B or 1, H or 1, T, T) = attn_mask · causal_mask(T, T): both must allow a pair.
Tensor CausalSelfAttention::combined_mask(std::size_t T, const Tensor& attn_mask) const {
    return attn_mask * functional::causal_mask(std::int64_t(T), std::int64_t(T));
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& attn_mask) const {
    Heads h = split_heads(x, 0);
    const auto B = std::int64_t(x.size(0)), T = std::int64_t(x.size(1));
    h.k = repeat_kv(h.k), h.v = repeat_kv(h.v);  // (B, H, T, hd): one K/V head per query head
    const double p = is_training() ? options_.dropout : 0.0;
    // y (B, H, T, hd) = causal attention of each head; as nanoGPT's `if self.flash:`, a kernel where
    // it is exactly the composed function. Tiled for T ≥ kTiledFromT: the fused kernel's (T, T)
    // weights outgrow the cache, while for short T recomputing them costs more than it saves.
    const bool use_fast = options_.fused && !attn_mask.defined() && p == 0;
    Tensor y;
    if (use_fast && T >= kTiledFromT) {
        y = functional::tiled_causal_attention(h.q, h.k, h.v);
    } else if (use_fast) {
        y = functional::fused_causal_attention(h.q, h.k, h.v);
    } else if (attn_mask.defined()) {
        functional::check_mask(attn_mask, {std::size_t(B), std::size_t(n_head_), std::size_t(T), std::size_t(T)},
                               "CausalSelfAttention");
        y = functional::scaled_dot_product_attention(h.q, h.k, h.v, combined_mask(std::size_t(T), attn_mask),
                                                     /*is_causal=*/false, p);
    } else {
        y = functional::scaled_dot_product_attention(h.q, h.k, h.v, Tensor(), /*is_causal=*/true, p);
    }
    // out (B, T, d), then dropout on the output (nanoGPT's resid_dropout)
    return functional::dropout(merge_heads(y, B, T), p, is_training());
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache& cache) const {
    check(!(is_training() && options_.dropout > 0), "CausalSelfAttention",
          "forward_cached does not apply dropout ({}): call eval() before generating", options_.dropout);
    NoGradGuard no_grad;
    const Heads h = split_heads(x, cache.length());  // positions P .. P + t - 1
    const auto B = std::int64_t(x.size(0)), t = std::int64_t(x.size(1));
    cache.append(h.k.data(), h.v.data());           // the cache now holds positions 0 .. P + t - 1
    // y (B, H, t, hd): each new query over the cached keys up to its own position, the g query heads
    // of a group reading their one K/V head in place (nn/kv_cache.cpp)
    const Tensor y = functional::cached_causal_attention(h.q, cache);
    return merge_heads(y, B, t);
}

Tensor CausalSelfAttention::attention_weights(const Tensor& x, const Tensor& attn_mask) const {
    NoGradGuard no_grad;
    Heads h = split_heads(x, 0);
    h.k = repeat_kv(h.k);
    const std::size_t B = x.size(0), T = x.size(1);
    if (!attn_mask.defined()) return functional::attention_weights(h.q, h.k, Tensor(), /*is_causal=*/true);
    functional::check_mask(attn_mask, {B, std::size_t(n_head_), T, T}, "CausalSelfAttention");
    return functional::attention_weights(h.q, h.k, combined_mask(T, attn_mask));
}

}  // namespace xgrad::nn
