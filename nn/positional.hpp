// nn/positional.hpp — positional encodings: telling attention where each token is.
//
// Attention compares every query with every key by a dot product, so it is blind to order:
// permute the tokens and the outputs are permuted the same way (examples/attention_basics
// checks this). A model that should tell "dog bites man" from "man bites dog" must be told
// the positions. Three ways, in the order the lesson takes them:
//
//   learned     x_t + P[t]            P (T_max, d) a trained table, one row per position
//               (GPT-2's wpe). Encodes the ABSOLUTE position t; knows nothing about
//               positions beyond T_max it never saw.
//   sinusoidal  x_t + PE[t]           PE (T_max, d) fixed, no parameters (Vaswani et al. 2017)
//               PE[t, 2i]   = sin(t / 10000^(2i/d))
//               PE[t, 2i+1] = cos(t / 10000^(2i/d))
//               Also absolute, but each pair (2i, 2i+1) turns at its own frequency, so PE[t+k]
//               is a fixed rotation of PE[t] for every t: offsets are easy to read off.
//   rotary      q_m ← R(m) q_m,  k_n ← R(n) k_n     (RoPE, Su et al. 2021), applied to the
//               queries and keys inside attention, not added to x. R(m) rotates each pair
//               (2i, 2i+1) by the angle m·θ_i, θ_i = base^(-2i/hd). Since rotations compose,
//               ⟨R(m)q, R(n)k⟩ = ⟨q, R(n−m)k⟩: the score depends on the RELATIVE offset n − m
//               only, not on where the pair sits.
//
// Legend: B batch, H heads, T time (sequence length), d width, hd head width,
//         i pair index in [0, d/2) or [0, hd/2), t/m/n positions.
// ref: Vaswani et al. 2017, "Attention Is All You Need", §3.5; Su et al. 2021, "RoFormer:
//      Enhanced Transformer with Rotary Position Embedding", §3.4.2; Radford et al. 2019 (GPT-2).
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
// For odd d the last column is the sine of pair i = (d-1)/2, whose cosine partner does not
// exist (the formula simply evaluated at every column; PyTorch's tutorial code has no odd
// case: its cos assignment fails on a shape mismatch).
// Throws ValueError if T or d is not positive.
// ref: Vaswani et al. 2017, §3.5; PyTorch tutorial "Language Modeling with nn.Transformer",
//      class PositionalEncoding.
Tensor sinusoidal_positions(std::int64_t T, std::int64_t d);

// x (..., T, d) + PE[:T], with PE held as a buffer "pe" (max_len, d): it is saved in
// state_dict() and checkpoints, never trained (as the PyTorch tutorial's PositionalEncoding,
// without its dropout).
class SinusoidalPositions : public Module {
public:
    // Throws ValueError if max_len or d is not positive.
    SinusoidalPositions(std::int64_t max_len, std::int64_t d);
    // x (..., T, d) → x + PE[:T] (..., T, d). Throws ValueError if x has fewer than 2 dims,
    // its last dim is not d, or T exceeds max_len.
    Tensor forward(const Tensor& x) const;
    Tensor pe;  // (max_len, d), the buffer
};

// ---- rotary (RoPE): rotate pairs of q and k by an angle proportional to the position ------------
// x (..., T, hd), positions (T,) int64 ≥ 0 → y (..., T, hd), with INTERLEAVED pairs
// (x[..., 2i], x[..., 2i+1]) as in the RoFormer paper and Meta's LLaMA reference code:
//   angle  a[t, i] = positions[t] · base^(-2i/hd)                      i in [0, hd/2)
//   y[..., t, 2i]   = x[..., t, 2i] · cos a − x[..., t, 2i+1] · sin a
//   y[..., t, 2i+1] = x[..., t, 2i] · sin a + x[..., t, 2i+1] · cos a
// Differentiable in x; positions carry no gradient. Angles are computed in double.
// (GPT-NeoX and Hugging Face's Llama pair i with i + hd/2 instead: a permutation of the
// channels, not the same numbers.)
// Throws ValueError if x has fewer than 2 dims, hd is odd, positions is not (T,), or base is
// not finite and > 0; IndexError naming the index of a negative position.
// ref: Su et al. 2021, RoFormer, §3.4.2; facebookresearch/llama model.py, apply_rotary_emb.
Tensor apply_rotary(const Tensor& x, const IndexTensor& positions, double base = 10000.0);

}  // namespace xgrad::nn
