// optim/clip_grad.hpp — gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_.
//
//     loss.backward();
//     double norm = optim::clip_grad_norm_(model.named_parameters(), /*max_norm=*/1.0);
//     opt.step();
#pragma once

#include <vector>

#include "core/tensor.hpp"

namespace xgrad::optim {

// Treats the gradients of all `params` as one vector G and computes its p-norm
//     ‖G‖_p = (Σ |g|^p)^(1/p)      (norm_type = p > 0)
//     ‖G‖_∞ = max |g|              (norm_type = infinity)
// accumulated in double. If ‖G‖ > max_norm, every gradient is scaled in place by
//     max_norm / (‖G‖ + 1e-6)
// (PyTorch's formula; the 1e-6 guards against division by zero), so the clipped norm is just
// under max_norm. Parameters without a gradient are skipped; a row-sparse gradient counts
// its k stored rows (the others are zero) and is scaled in place. Returns ‖G‖ before clipping
// (0 when no parameter has a gradient).
// A NaN or infinite ‖G‖ (a NaN or ±inf in some gradient, or an overflow of Σ |g|^p):
//   error_if_nonfinite = true    throws ValueError before any gradient changes (PyTorch
//                                throws RuntimeError with the same condition);
//   error_if_nonfinite = false   (the default, as in PyTorch 1.13) ‖G‖ is returned and the
//                                gradients are scaled all the same: by NaN when ‖G‖ is NaN, so
//                                every gradient, finite or not, becomes NaN; by 0 when ‖G‖ is
//                                inf, so finite entries become 0 and infinite ones NaN. Checked
//                                against torch.nn.utils.clip_grad_norm_ (torch 1.13).
// Throws ValueError for max_norm < 0 or NaN, or norm_type ≤ 0 or NaN.
double clip_grad_norm_(const NamedTensors& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace xgrad::optim
