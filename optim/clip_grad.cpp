// optim/clip_grad.cpp — clip_grad_norm_: one pass to measure the total norm, one to scale.
//
// Legend: n elements of a dense gradient, k rows and d width of a row-sparse one.
#include <xgrad/optim/clip_grad.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xgrad/core/autograd.hpp>

namespace xgrad::optim {

namespace {

// A parameter's stored gradient values, read only: n dense, or k·d row-sparse; (null, 0) if none.
std::pair<const real*, std::size_t> grad_values(const Tensor& p) {
    const TensorImpl& t = *p.impl();
    if (t.sparse_grad) return {t.sparse_grad->values.data(), t.sparse_grad->values.size()};
    if (t.grad) return {t.grad->data.data(), t.grad->data.size()};
    return {nullptr, 0};
}

}  // namespace

std::array<double, 8> grad_square_partials(const Tensor& p) {
    // Σ g² in 8 independent partial sums (element i to partial i mod 8), added in a fixed order by
    // the caller: 8 add chains side by side instead of one serial chain.
    auto [g, n] = grad_values(p);
    std::array<double, 8> part{0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (std::size_t j = 0; j < 8; ++j) part[j] += static_cast<double>(g[i + j]) * g[i + j];
    for (std::size_t j = 0; i + j < n; ++j) part[j] += static_cast<double>(g[i + j]) * g[i + j];
    return part;
}

void scale_to_max_norm_(const std::vector<Tensor>& params, double total, double max_norm, double norm_type,
                        bool error_if_nonfinite) {
    check(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_",
          "the total norm of order {} of the gradients is {}, so they cannot be clipped; to scale "
          "them by the non-finite norm anyway (making them NaN or 0), set error_if_nonfinite=false",
          norm_type, total);
    const double coef = max_norm / (total + 1e-6);   // clip coefficient
    if (!(coef >= 1.0)) {                              // coef < 1, or NaN (propagates, as PyTorch)
        const real c = static_cast<real>(coef);
        for (const auto& p : params) scale_grad_(*p.impl(), c);  // g ← g · max_norm / (‖G‖ + 1e-6)
    }
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
    check(max_norm >= 0, "clip_grad_norm_", "max_norm must be >= 0; got {}", max_norm);
    check(norm_type > 0, "clip_grad_norm_", "norm_type must be > 0 or infinity; got {}", norm_type);
    const bool inf_norm = std::isinf(norm_type);
    double acc = 0;  // Σ |g|^p, or max |g|
    for (const auto& p : params) {
        check(p.defined(), "clip_grad_norm_", "got an undefined tensor");
        if (norm_type == 2.0) {
            for (double s : grad_square_partials(p)) acc += s;
            continue;
        }
        auto [g, n] = grad_values(p);
        for (std::size_t i = 0; i < n; ++i) {
            const double a = std::abs(static_cast<double>(g[i]));
            if (inf_norm) {
                acc = std::isnan(a) || std::isnan(acc) ? std::numeric_limits<double>::quiet_NaN()
                                                       : std::max(acc, a);
            } else {
                acc += std::pow(a, norm_type);
            }
        }
    }
    const double total = inf_norm ? acc : (norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1 / norm_type));
    scale_to_max_norm_(params, total, max_norm, norm_type, error_if_nonfinite);
    return total;
}

double clip_grad_norm_(const NamedTensors& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
    std::vector<Tensor> tensors;
    tensors.reserve(params.size());
    for (const auto& np : params) tensors.push_back(np.second);
    return clip_grad_norm_(tensors, max_norm, norm_type, error_if_nonfinite);
}

}  // namespace xgrad::optim
