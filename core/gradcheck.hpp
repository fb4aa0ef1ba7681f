// core/gradcheck.hpp — check an op's backward against finite differences.
//
// For every element x_i of every input that requires grad, with L = Σ_j w_j · out_j (fixed
// pseudo-random w, so every output element counts):
//     analytic  dL/dx_i   from L.backward()
//     numeric   (L(x_i + eps) - L(x_i - eps)) / (2 eps)        central difference, error O(eps²)
// Passes when |analytic - numeric| <= atol + rtol·|numeric| everywhere. Central differences lose
// half the digits, so the tests link `xgrad_f64` (real = double), not float32.
// ref: PyTorch docs, torch.autograd.gradcheck (same method and default tolerances in double).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// gradcheck's step and tolerances; setters chain, as LibTorch's: GradcheckOptions().eps(1e-6).rtol(0.02)
class GradcheckOptions {
public:
    GradcheckOptions& eps(double v) { eps_ = v; return *this; }
    GradcheckOptions& atol(double v) { atol_ = v; return *this; }
    GradcheckOptions& rtol(double v) { rtol_ = v; return *this; }

    double eps() const { return eps_; }    // the finite-difference step
    double atol() const { return atol_; }  // absolute tolerance
    double rtol() const { return rtol_; }  // relative tolerance, times |numeric|

private:
#ifdef XGRAD_DOUBLE
    double eps_ = 1e-6, atol_ = 1e-5, rtol_ = 1e-3;
#else
    double eps_ = 1e-2, atol_ = 1e-2, rtol_ = 1e-2;  // float32: only coarse errors are caught
#endif
};

struct GradcheckResult {
    bool ok = true;
    double max_abs_error = 0;  // over all checked elements
    std::size_t checked = 0;   // number of elements compared
    std::string message;       // the first failure: input, element, analytic vs numeric
};

// Runs the check; `inputs` are perturbed and restored, and left holding dL/dx in .grad. Throws
// ValueError if eps is not finite and > 0, atol or rtol not finite and >= 0, f returns an undefined
// tensor, or no input requires grad.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace xgrad
