// nn/attention/fused.hpp — causal scaled dot-product attention as one fused op.
//
// Oracle: scaled_dot_product_attention(q, k, v, Tensor(), /*is_causal=*/true, 0, scale) of
// composed.hpp (for the packed form, with the heads split and merged around it), held equal (to
// 1e-5 in float) by tests/nn/attention/test_fused.cpp; tests/nn/attention/gradcheck_fused.cpp
// gradchecks both forms alone. Called only by CausalSelfAttention::forward, visibly.
//
// Legend: Tq queries, Tk keys, hd head width, hv value width; "..." the leading dims (B, H).
#pragma once

#include <cstdint>
#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::functional {

// out (..., Tq, hv) = softmax(scale · q · kᵀ, query i sees keys j ≤ i only) · v, with its own backward.
//   Row i of out, and every gradient row i sends back, read keys and values j ≤ i only: a NaN or
//   inf at a later position does not reach them.
//   q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv): the same leading dims; real.
//   scale: defaults to 1/√hd. The causal triangle is aligned top-left when Tq ≠ Tk, as PyTorch's.
// Throws ValueError for the shapes scaled_dot_product_attention rejects (ranks, leading dims, hd, Tk)
// and for a NaN or infinite scale; OutOfMemoryError, before allocating, when the weights it saves,
// Π(...)·Tq·Tk reals, and the backward's (Tq, Tk) per thread exceed the physical memory (tiled.hpp
// needs neither).
// ref: Vaswani et al. 2017, eq. (1); PyTorch docs, torch.nn.functional.scaled_dot_product_attention
Tensor fused_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              std::optional<double> scale = std::nullopt);

// The same attention on the heads where c_attn leaves them, with no copy to split or merge them:
//   qkv (B, T, 3d), d = H·hd: [q | k | v] on the last dim, head h of each at its columns h·hd ..
//   (h + 1)·hd − 1 (nanoGPT's c_attn output); returns y (B, T, d) with head h's output at those
//   columns (what merge_heads feeds c_proj). Equal to narrowing q, k and v, each
//   .reshape({B, T, H, hd}).transpose(1, 2), fused_causal_attention, then
//   .transpose(1, 2).reshape({B, T, d}); its backward writes dL/dqkv (B, T, 3d) directly.
//   n_head = H ≥ 1; scale defaults to 1/√hd. B = 0 or T = 0 give an empty y.
// Throws ValueError for qkv undefined or not 3-D, n_head < 1, a last dim that is not a positive
// multiple of 3·n_head, or a NaN or infinite scale; OutOfMemoryError as fused_causal_attention.
Tensor fused_causal_attention_packed(const Tensor& qkv, std::int64_t n_head,
                                     std::optional<double> scale = std::nullopt);

}  // namespace xgrad::nn::functional
