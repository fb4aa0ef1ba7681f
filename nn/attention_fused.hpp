// nn/attention_fused.hpp — the fused fast path of scaled_dot_product_attention (nn/attention.hpp)
// for the case without attn_mask and without dropout. scaled_dot_product_attention calls it by
// itself; it is declared here for the tests that compare it with the composed form.
//
// Legend: Tq queries, Tk keys, hd head width, hv value width; "..." the leading dims (B, H).
#pragma once

#include "core/tensor.hpp"

namespace xgrad::nn::functional {

// out (..., Tq, hv) = softmax(scale · q · kᵀ, causal: keys j ≤ i only) · v, one op with its own
// backward (nn/attention_fused.cpp).
//   q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv), the same leading dims, Tk ≥ 1, hd ≥ 1:
//   checked by scaled_dot_product_attention, not here. real.
// ref: Vaswani et al. 2017, eq. (1); PyTorch docs, torch.nn.functional.scaled_dot_product_attention
Tensor attention_fused(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, real scale);

}  // namespace xgrad::nn::functional
