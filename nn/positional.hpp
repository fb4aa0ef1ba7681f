// nn/positional.hpp — positional encodings: telling attention where each token is.
//
// Attention is blind to order (permute the tokens and the outputs permute the same way), so a
// model must be told the positions. Three ways:
//   learned     x_t + P[t]          P (T_max, d) a trained table (GPT-2's wpe); absolute, and
//                                   nothing for positions beyond T_max
//   sinusoidal  x_t + PE[t]         PE (T_max, d) fixed: PE[t, 2i] = sin(t / 10000^(2i/d)),
//                                   PE[t, 2i+1] = cos(...); each pair turns at its own
//                                   frequency, so PE[t+k] is a fixed rotation of PE[t]
//   rotary      q_m ← R(m) q_m,  k_n ← R(n) k_n  inside attention, not added to x: R(m) rotates
//                                   pair i by m·θ_i, θ_i = base^(-2i/hd), so ⟨R(m)q, R(n)k⟩ =
//                                   ⟨q, R(n−m)k⟩ depends on the offset n − m only
//
// Legend: T time, d width, hd head width, i pair index, t/m/n positions.
// ref: Vaswani et al. 2017, §3.5; Su et al. 2021, "RoFormer", §3.4.2; Radford et al. 2019 (GPT-2).
#pragma once

#include <cstdint>

#include "nn/embedding.hpp"
#include "nn/module.hpp"

namespace xgrad::nn {

// ---- learned: a trained table over the positions 0 .. T-1 ---------------------------------
// An Embedding(max_len, d) looked up with ids 0, 1, ..., T-1: nanoGPT's
//     pos = torch.arange(0, t); pos_emb = self.transformer.wpe(pos)
// Its parameter is "weight" (max_len, d), so registered as "wpe" it is "transformer.wpe.weight".
class LearnedPositions : public Embedding {
public:
    // Throws ValueError if max_len or d is not positive.
    LearnedPositions(std::int64_t max_len, std::int64_t d);
    // The rows for positions 0 .. T-1: (T, d), differentiable with respect to the table.
    // Add it to token embeddings (B, T, d); it broadcasts over B. Throws ValueError if T is
    // negative or above max_len (a learned table has no row for an unseen position).
    Tensor forward(std::int64_t T) const;
    std::int64_t max_len() const { return num_embeddings(); }
};

// ---- sinusoidal: a fixed table ----------------------------------------------------------------
// PE (T, d): PE[t, j] = sin(t·ω_i) for even j = 2i, cos(t·ω_i) for odd j = 2i+1, with
// ω_i = 10000^(-2i/d). Computed in double, rounded once to `real`; requires_grad is false.
// For odd d the last column is the sine of pair (d-1)/2, which has no cosine partner.
// Throws ValueError if T or d is not positive.
// ref: Vaswani et al. 2017, §3.5; PyTorch tutorial "Language Modeling with nn.Transformer",
//      class PositionalEncoding.
Tensor sinusoidal_positions(std::int64_t T, std::int64_t d);

// ---- rotary (RoPE): rotate pairs of q and k by an angle proportional to the position ------------
// x (..., T, hd), positions (T,) int64 ≥ 0 → y (..., T, hd), with INTERLEAVED pairs
// (x[..., 2i], x[..., 2i+1]) as in the RoFormer paper and Meta's LLaMA reference code:
//   angle  a[t, i] = positions[t] · base^(-2i/hd)                      i in [0, hd/2)
//   y[..., t, 2i]   = x[..., t, 2i] · cos a − x[..., t, 2i+1] · sin a
//   y[..., t, 2i+1] = x[..., t, 2i] · sin a + x[..., t, 2i+1] · cos a
// Differentiable in x; positions carry no gradient. Angles are computed in double.
// (GPT-NeoX and Hugging Face's Llama pair i with i + hd/2 instead: other numbers.)
// Throws ValueError if x has fewer than 2 dims, hd is odd, positions is not (T,), or base is
// not finite and > 0; IndexError naming the index of a negative position.
// ref: Su et al. 2021, RoFormer, §3.4.2; facebookresearch/llama model.py, apply_rotary_emb.
Tensor apply_rotary(const Tensor& x, const IndexTensor& positions, double base = 10000.0);

}  // namespace xgrad::nn
