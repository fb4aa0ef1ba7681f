// nn/attention/tiled.hpp — causal attention in tiles with an online softmax ("flash" attention),
// which never stores the (Tq, Tk) weights: it saves O(Tq) numbers per head for backward, not O(Tq·Tk).
//
// Oracle: scaled_dot_product_attention(q, k, v, tril(ones({Tq, Tk}), diagonal), false, 0, scale),
// equal to 1e-5 in tests/nn/attention/test_tiled.cpp; gradcheck_tiled.cpp checks it alone.
// Legend: Tq queries, Tk keys, hd head width, hv value width; "..." the leading dims (B, H).
#pragma once

#include <cstdint>
#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::functional {

// out (..., Tq, hv) = softmax(scale · q · kᵀ, query i sees keys j ≤ i + diagonal only) · v,
// with its own backward, which recomputes the weights tile by tile.
//   q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv): the same leading dims; real. scale: 1/√hd.
//   diagonal: 0 aligns the triangle top-left (PyTorch's is_causal), Tk − Tq bottom-right (a KV
//     cache's). Any value is valid: a query that sees no key gets out 0 and zero gradients.
//   Row i of out, and every gradient row i sends back, read keys and values j ≤ i + diagonal
//   only: a NaN or inf at a later position does not reach them.
// Saved for backward: q, k, v, the output and L (..., Tq), each row's log-sum-exp (in nats). The
// weights e^(S − L), recomputed in float, err by about |S|·2⁻²⁴: scores in the thousands cost the
// gradients digits the composed form keeps. Bit-identical for any thread count (fixed sum order).
// Throws ValueError for the shapes scaled_dot_product_attention rejects (ranks, leading dims, hd, Tk)
// and for a NaN or infinite scale.
// ref: Dao 2023, "FlashAttention-2", Algorithms 1 and 2; Milakov & Gimelshein 2018 (online softmax).
Tensor tiled_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              std::optional<double> scale = std::nullopt, std::int64_t diagonal = 0);

}  // namespace xgrad::nn::functional
