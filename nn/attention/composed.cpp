// nn/attention/composed.cpp — attention, one named step per line, composed from core ops.
// Legend as in composed.hpp. No backward of its own: every step is a gradchecked core op. It is
// the fused, tiled and cached kernels' oracle; CausalSelfAttention picks among them (forward,
// forward_cached).
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
#include <xgrad/nn/attention/composed.hpp>

#include <cmath>
#include <limits>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/masking.hpp>
#include <xgrad/core/matmul.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>
#include <xgrad/nn/dropout.hpp>

namespace xgrad::nn::functional {

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";
using detail::AttentionSizes;

// The three steps, for keep (..., Tq, Tk) broadcastable, 1 where query i may see key j, or
// undefined when every key is visible. Each sums over the visible keys only: a NaN or inf in a
// hidden k or v reaches no query that may not see it, forward or backward.
Tensor visible_scores(const Tensor& q, const Tensor& k, const Tensor& keep, real scale);
Tensor softmax_over_visible(const Tensor& scores, const Tensor& keep);
Tensor weighted_sum_of_visible(const Tensor& weights, const Tensor& v, const Tensor& keep);

Tensor keep_of(const AttentionSizes& s, const Tensor& attn_mask, bool is_causal);
real scale_of(const AttentionSizes& s, std::optional<double> scale) {
    return detail::attention_scale(scale, s.hd, kSdpa);
}

}  // namespace

// ---- scaled_dot_product_attention -------------------------------------------------------
// out (..., Tq, hv) = dropout(softmax(mask(q·kᵀ·scale))) · v, each step a core op.
// ref: Vaswani et al. 2017, eq. (1); PyTorch docs, torch.nn.functional.scaled_dot_product_attention
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, double dropout_p, std::optional<double> scale) {
    const AttentionSizes s = detail::check_qkv(q, k, &v, kSdpa);
    check(dropout_p >= 0 && dropout_p <= 1, kSdpa, "dropout_p must be in [0, 1]; got {}", dropout_p);
    const Tensor keep = keep_of(s, attn_mask, is_causal);                 // (..., Tq, Tk) or undefined
    Tensor scores = visible_scores(q, k, keep, scale_of(s, scale));      // (..., Tq, Tk)
    Tensor weights = softmax_over_visible(scores, keep);                 // (..., Tq, Tk), rows sum to 1
    // dropout on the weights (inverted: the kept ones are scaled by 1/(1 - p))
    if (dropout_p > 0) weights = dropout(weights, dropout_p, /*training=*/true);
    return weighted_sum_of_visible(weights, v, keep);                    // (..., Tq, hv)
}

Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal,
                         std::optional<double> scale) {
    const AttentionSizes s = detail::check_qkv(q, k, nullptr, kSdpa);
    const Tensor keep = keep_of(s, attn_mask, is_causal);
    return softmax_over_visible(visible_scores(q, k, keep, scale_of(s, scale)), keep);
}

// keep (Tq, Tk) = tril(ones): row i keeps keys 0..i (top-left, as PyTorch's is_causal builds it)
Tensor causal_mask(std::int64_t Tq, std::int64_t Tk) {
    check(Tq >= 0 && Tk >= 0, "causal_mask", "sizes must be >= 0; got ({}, {})", Tq, Tk);
    return tril(ones({Tq, Tk}));
}

namespace {

// scores (..., Tq, Tk) = q (..., Tq, hd) · kᵀ (..., hd, Tk) · scale where keep = 1, -inf where 0.
// Entry [i, j] is how well query i matches key j; the 1/√hd keeps its variance near 1 when q and k
// have unit-variance entries, so the softmax does not saturate (Vaswani §3.2.1).
Tensor visible_scores(const Tensor& q, const Tensor& k, const Tensor& keep, real scale) {
    if (!keep.defined()) return matmul(q, transpose(k, -2, -1)) * scale;
    // sampled_matmul forms entry [i, j] only where keep = 1 (0 elsewhere): it never multiplies query
    // i by a key it may not see, in the forward or the backward, so a NaN there stays there.
    const Tensor scores = sampled_matmul(q, transpose(k, -2, -1), keep) * scale;
    // -inf where keep = 0: e^-inf = 0, so those keys get weight 0
    return masked_fill(scores, eq(keep, 0), -std::numeric_limits<real>::infinity());
}

// weights (..., Tq, Tk) = softmax over the keys: each row is ≥ 0 and sums to 1, or is 0 for a
// query with no visible key. Such a row is all -inf, whose softmax is 0/0 = NaN; as PyTorch ≥ 2.5
// it is refilled with 0 before the softmax and its weights set to 0 after it. masked_fill passes
// no gradient through filled entries, so the row sends exactly 0 back to q and k.
Tensor softmax_over_visible(const Tensor& scores, const Tensor& keep) {
    if (!keep.defined()) return softmax(scores, -1);
    // empty (..., Tq, 1) = [Σ_j keep[..., i, j] = 0]
    const Tensor empty = eq(sum(keep, -1, /*keepdim=*/true), 0);
    bool any_empty = false;
    for (real e : empty.data()) any_empty = any_empty || e != 0;
    if (!any_empty) return softmax(scores, -1);
    return masked_fill(softmax(masked_fill(scores, empty, 0), -1), empty, 0);
}

// out (..., Tq, hv) = weights (..., Tq, Tk) · v (..., Tk, hv): row i averages the values it sees.
// With a mask, row i sums only over its visible keys: a matmul would also add 0 · v[j] for a
// hidden key j, and 0 · NaN = NaN would carry a future NaN into every earlier row.
Tensor weighted_sum_of_visible(const Tensor& weights, const Tensor& v, const Tensor& keep) {
    if (!keep.defined()) return matmul(weights, v);
    return masked_matmul(weights, v, keep);
}

ArrayShape scores_shape(const AttentionSizes& s) {
    ArrayShape out = s.lead;
    out.push_back(s.Tq);
    out.push_back(s.Tk);
    return out;
}

// keep (..., Tq, Tk) broadcastable, 1 where query i may attend key j; undefined when every key is
// visible. A mask of rank 0 or 1 is read as one row, (1, 1) or (1, Tk), broadcast as PyTorch's.
Tensor keep_of(const AttentionSizes& s, const Tensor& attn_mask, bool is_causal) {
    check(!(is_causal && attn_mask.defined()), kSdpa,
          "give attn_mask or is_causal, not both (as PyTorch); to combine them pass "
          "attn_mask * causal_mask(Tq, Tk) with is_causal = false");
    if (is_causal) return causal_mask(std::int64_t(s.Tq), std::int64_t(s.Tk));
    if (!attn_mask.defined()) return Tensor();
    detail::check_mask(attn_mask, scores_shape(s), kSdpa);
    if (attn_mask.dim() >= 2) return attn_mask;
    return attn_mask.reshape({1, attn_mask.dim() == 0 ? std::int64_t(1) : std::int64_t(attn_mask.size(0))});
}

}  // namespace

}  // namespace xgrad::nn::functional
