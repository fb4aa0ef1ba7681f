// core/random.hpp — random sampling: multinomial (core/random.cpp). Part of core/ops.hpp.
//
// The draws come from xgrad's generator (std::mt19937_64, core/tensor.hpp), not PyTorch's Philox or
// MT19937 streams: for one seed the bits differ from torch's, the distribution is the same.
#pragma once

#include <cstdint>
#include <random>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// multinomial: num_samples category numbers per row of probs, drawn with probability
//   probs[c] / Σ probs (the weights need not sum to 1). probs (C,) → (num_samples,);
//   (N, C) → (N, num_samples). Without replacement each draw removes its category and the rest
//   are renormalised (sequential sampling, the distribution torch.multinomial samples). No gradient.
//   Draws from the process-wide generator() (holding generator_mutex()), or from `gen`.
//   Throws ValueError for probs not 1-d or 2-d, C = 0, a negative, NaN or inf weight, a row
//   summing to 0, num_samples <= 0, rows × num_samples above 2^60 (kMaxNumel), and without
//   replacement num_samples > C, or num_samples > the number of non-zero weights in a row
//   (torch 1.13's CPU kernel then returns zero-weight categories; its CUDA kernel refuses).  ref: PyTorch docs, torch.multinomial.
IndexTensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement = false);
IndexTensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, std::mt19937_64& gen);

}  // namespace xgrad
