// nn/attention/composed.hpp — scaled dot-product attention composed from core ops: the lesson,
// and the oracle the fused, tiled and cached kernels are tested against.
// Legend: Tq queries, Tk keys, hd head width, hv value width; "..." the leading dims, usually (B, H).
// Masks: 0/1, 1 = may attend; a fully masked query gets weights 0; a hidden key's NaN reaches no
// query that may not see it (README.md, "The mask convention").
// ref: Vaswani et al. 2017, "Attention Is All You Need", §3.2; PyTorch docs,
//      torch.nn.functional.scaled_dot_product_attention.
#pragma once

#include <cstdint>
#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::functional {

// Scaled dot-product attention, composed from core ops (each step's backward is the op's own):
//     scores  (..., Tq, Tk) = q (..., Tq, hd) · kᵀ (..., hd, Tk) · scale
//     weights (..., Tq, Tk) = softmax(scores with -inf where a key is masked, over Tk)
//     out     (..., Tq, hv) = dropout(weights, dropout_p) · v (..., Tk, hv)
//   q, k, v: the same leading dims ..., usually (B, H), possibly none; real.
//   attn_mask: undefined, or 0/1 broadcasting to (..., Tq, Tk); rank 0 or 1 broadcasts as PyTorch's.
//     One that hides every query's own position (Tq = Tk ≥ 2, a 0 diagonal) is warned about once
//     per process on stderr: it is almost always a future mask in masked_fill's form (1 = hide).
//   is_causal: query i attends to keys 0..i only (top-left aligned, as PyTorch); not with attn_mask.
//   dropout_p: applied whenever p > 0 (inverted), as PyTorch's: pass 0 at evaluation.
//   scale: defaults to 1/√hd.
// Throws ValueError for: ranks below 2 or unequal; leading dims that differ; q and k of different
// hd; k and v of different Tk; hd = 0; Tk = 0 with Tq > 0 (Tq = 0 gives the empty output); a mask
// that does not broadcast or holds other than 0 and 1; a mask with is_causal; dropout_p outside [0, 1];
// a NaN or infinite scale.
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

}  // namespace xgrad::nn::functional
