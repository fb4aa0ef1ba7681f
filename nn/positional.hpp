// nn/positional.hpp — positional encodings: telling attention where each token is.
//
// Attention is blind to order (permuting the tokens permutes the outputs), so a model must be
// told the positions. Three ways:
//   learned     x_t + P[t]          P (T_max, d) a trained table (GPT-2's wpe); none beyond T_max
//   sinusoidal  x_t + PE[t]         PE (T_max, d) fixed sines and cosines, one frequency per pair,
//                                   so PE[t+k] is a fixed rotation of PE[t]
//   rotary      q_m ← R(m) q_m,  k_n ← R(n) k_n  inside attention: R(m) rotates pair i by m·θ_i,
//                                   so ⟨R(m)q, R(n)k⟩ = ⟨q, R(n−m)k⟩ depends on n − m only
//
// Legend: T time, d width, hd head width, i pair index, t/m/n positions.
// ref: Vaswani et al. 2017, §3.5; Su et al. 2021, "RoFormer", §3.4.2; Radford et al. 2019 (GPT-2).
#pragma once

#include <cstdint>

#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// ---- learned: a trained table over the positions 0 .. T-1 ---------------------------------
// An Embedding(max_len, d) looked up with ids 0 .. T-1, as nanoGPT's wpe; parameter "weight".
class LearnedPositions : public Embedding {
public:
    // Throws ValueError if max_len or d is not positive, or the table passes 2^60 elements.
    LearnedPositions(std::int64_t max_len, std::int64_t d);
    // (T, d), the rows for positions 0 .. T-1; broadcasts over B when added to (B, T, d).
    // Throws ValueError if T is negative or above max_len.
    Tensor forward(std::int64_t T) const;
    std::int64_t max_len() const { return num_embeddings(); }
};

// ---- sinusoidal: a fixed table ----------------------------------------------------------------
// PE (T, d), no gradient, computed in double (formula in nn/positional.cpp); for odd d the last
// column is a sine without its cosine. Throws ValueError if T or d is not positive.
// ref: Vaswani et al. 2017, §3.5; PyTorch tutorial "Language Modeling with nn.Transformer",
//      class PositionalEncoding.
Tensor sinusoidal_positions(std::int64_t T, std::int64_t d);

// ---- rotary (RoPE): rotate pairs of q and k by an angle proportional to the position ------------
// x (..., T, hd), positions (T,) int64 ≥ 0 → y (..., T, hd); pair i is (x[..., 2i], x[..., 2i+1]),
// INTERLEAVED as RoFormer and Meta's LLaMA (GPT-NeoX pairs i with i + hd/2: other numbers).
// Differentiable in x; angles in double (formula in nn/positional.cpp).
// Throws ValueError if x has fewer than 2 dims, hd is odd, positions is not (T,), or base is
// not finite and > 0; IndexError naming the index of a negative position.
// ref: Su et al. 2021, RoFormer, §3.4.2; facebookresearch/llama model.py, apply_rotary_emb.
Tensor apply_rotary(const Tensor& x, const IndexTensor& positions, double base = 10000.0);

}  // namespace xgrad::nn
