// nn/feed_forward.hpp — the SwiGLU feed-forward of LLaMA (Meta's FeedForward), and the rule that
// picks its hidden width.
//
// Legend: x (..., d), hidden width h. Three Linear layers, named as in Meta's llama model.py:
//   w1 (d → h), w3 (d → h), w2 (h → d)
//   y (..., d) = w2( silu(w1 x) ⊙ w3 x )        silu(a) = a·σ(a), the gate; ⊙ elementwise
// GPT-2's MLP is w2(gelu(w1 x)) with h = 4d; SwiGLU gates it with a third matrix, and h ≈ 8d/3
// keeps the parameter count near 8d² (3·d·h instead of 2·d·4d).
// ref: Shazeer 2020, "GLU Variants Improve Transformer"; Touvron et al. 2023, "LLaMA";
// facebookresearch/llama, llama/model.py, class FeedForward
#pragma once

#include <cstdint>
#include <memory>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// LLaMA's hidden width for model width d: h = multiple_of · ⌈⌊2 · 4d / 3⌋ / multiple_of⌉, the
// 4d of GPT-2 scaled by 2/3 (three matrices instead of two) and rounded up to a multiple of
// multiple_of (hardware-friendly sizes). d 128 → 384, d 64 → 192, d 256 → 704 (multiple_of 64).
// Throws ValueError if d or multiple_of is not positive, or too large for 8d/3 in int64 (d above
// 2^58, multiple_of above 2^60).
// ref: facebookresearch/llama, llama/model.py, FeedForward.__init__ (with hidden_dim = 4 · dim)
std::int64_t swiglu_hidden_width(std::int64_t d, std::int64_t multiple_of = 64);

// The SwiGLU feed-forward (LLaMA's FeedForward): x (..., d) → y (..., d), formula above.
// Submodules "w1", "w3" Linear(d, hidden) and "w2" Linear(hidden, d), with biases only if
// bias = true (LLaMA has none); PyTorch's Linear initialisation (nn/linear.hpp).
// Throws ValueError if d or hidden is not positive or the weights pass 2^60 elements, and forward
// throws (from Linear) if x's last dim is not d.
class SwiGLU : public Module {
public:
    SwiGLU(std::int64_t d, std::int64_t hidden, bool bias = false);
    Tensor forward(const Tensor& x) const;

    std::shared_ptr<Linear> w1;  // (d → hidden), through silu: the gate
    std::shared_ptr<Linear> w2;  // (hidden → d), the output projection
    std::shared_ptr<Linear> w3;  // (d → hidden), the value the gate scales
};

}  // namespace xgrad::nn
