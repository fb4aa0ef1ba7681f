// nn/attention/fused.hpp — causal scaled dot-product attention as one fused op.
//
// Oracle: scaled_dot_product_attention(q, k, v, Tensor(), /*is_causal=*/true, 0, scale) of
// composed.hpp, held equal (to 1e-5 in float) by tests/nn/attention/test_fused.cpp;
// tests/nn/attention/gradcheck_fused.cpp gradchecks this kernel alone. Called only by
// CausalSelfAttention::forward, visibly.
//
// Legend: Tq queries, Tk keys, hd head width, hv value width; "..." the leading dims (B, H).
#pragma once

#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::functional {

// out (..., Tq, hv) = softmax(scale · q · kᵀ, query i sees keys j ≤ i only) · v, with its own backward.
//   Row i of out, and every gradient row i sends back, read keys and values j ≤ i only: a NaN or
//   inf at a later position does not reach them.
//   q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv): the same leading dims; real.
//   scale: defaults to 1/√hd. The causal triangle is aligned top-left when Tq ≠ Tk, as PyTorch's.
// Throws ValueError for the shapes scaled_dot_product_attention rejects (ranks, leading dims, hd, Tk)
// and for a NaN or infinite scale.
// ref: Vaswani et al. 2017, eq. (1); PyTorch docs, torch.nn.functional.scaled_dot_product_attention
Tensor fused_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              std::optional<double> scale = std::nullopt);

}  // namespace xgrad::nn::functional
