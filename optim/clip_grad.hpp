// optim/clip_grad.hpp — gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_.
//
//     loss.backward();
//     double norm = optim::clip_grad_norm_(model.named_parameters(), /*max_norm=*/1.0);
//     opt.step();
#pragma once

#include <array>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad::optim {

// The p-norm of all gradients as one vector G, in double: ‖G‖_p = (Σ |g|^p)^(1/p), or
// ‖G‖_∞ = max |g|. If ‖G‖ > max_norm, every gradient is scaled in place by
// max_norm / (‖G‖ + 1e-6) (PyTorch's formula). A row-sparse gradient counts its k stored rows.
// Returns ‖G‖ before clipping (0 without gradients). A non-finite ‖G‖ throws ValueError when
// error_if_nonfinite; otherwise (the default, as torch 1.13) gradients are scaled all the same,
// by NaN or 0. Throws ValueError for max_norm < 0 or NaN, or norm_type ≤ 0 or NaN.
double clip_grad_norm_(const NamedTensors& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// The two halves of clip_grad_norm_ for norm_type 2, for a norm assembled across ranks
// (distributed/zero.hpp), where each rank holds some of the gradients:
// Σ g² of p's stored gradient (dense, or the k·d values of a row-sparse one) as the 8 partial sums
// clip_grad_norm_ adds in order (element i into partial i mod 8); zeros when p has none. Adding
// these for every parameter in order gives clip_grad_norm_'s Σ g² bit for bit.
std::array<double, 8> grad_square_partials(const Tensor& p);
// Scales every gradient of `params` by max_norm / (total_norm + 1e-6) when that is below 1 (or
// NaN), as clip_grad_norm_ does once it has total_norm. The same errors.
void scale_to_max_norm_(const std::vector<Tensor>& params, double total_norm, double max_norm,
                        double norm_type = 2.0, bool error_if_nonfinite = false);

}  // namespace xgrad::optim
