// optim/clip_grad.hpp — gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_.
//
//     loss.backward();
//     double norm = optim::clip_grad_norm_(model.named_parameters(), /*max_norm=*/1.0);
//     opt.step();
#pragma once

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

}  // namespace xgrad::optim
