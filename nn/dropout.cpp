// nn/dropout.cpp — dropout, forward and backward, and the Dropout module.
// Legend: x any shape, n = x.numel(); mask (scaled) has x's shape.
#include <xgrad/nn/dropout.hpp>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad::nn {

namespace {

void check_p(double p, const char* op) {
    check(p >= 0 && p <= 1, op, "p must be in [0, 1]; got {}", p);  // false for NaN too
}

}  // namespace

namespace functional {

// ---- dropout --------------------------------------------------------------------------------------
// forward : y_i = x_i · m_i,  m_i = keep_i / (1 - p),  keep_i ~ Bernoulli(1 - p)   (m saved)
// backward: dL/dx_i = dL/dy_i · m_i
// keep_i: 32 random bits u ≥ t, t = ⌊p·2³²⌋, so the drop probability is p' = t/2³² (p rounded down
// to a multiple of 2⁻³²) and m = 1/(1 - p') keeps E[m_i] = 1 exactly; with p = 1, m = 0.
// ref: Srivastava et al. 2014; PyTorch docs, torch.nn.functional.dropout
Tensor dropout(const Tensor& x, double p, bool training) {
    const profiler::OpScope scope("dropout", x);
    check(x.defined(), "dropout", "the input is an undefined tensor");
    check_p(p, "dropout");
    if (!training || p == 0) return x;

    const Array& xd = x.data();
    const std::size_t n = xd.size();
    const std::uint64_t threshold = static_cast<std::uint64_t>(std::ldexp(p, 32));  // t = ⌊p·2³²⌋ ≤ 2³²
    const double p_drawn = std::ldexp(double(threshold), -32);                    // p' = t / 2³²
    const real scale = p_drawn < 1 ? real(1 / (1 - p_drawn)) : real(0);
    Array mask(xd.shape());
    real* pm = mask.data();
    std::lock_guard<std::mutex> lock(generator_mutex());  // the generator is shared by all threads
    auto& gen = generator();
    for (std::size_t i = 0; i < n; i += 2) {
        const std::uint64_t bits = gen();
        pm[i] = (bits & 0xffffffffu) >= threshold ? scale : real(0);
        if (i + 1 < n) pm[i + 1] = (bits >> 32) >= threshold ? scale : real(0);
    }
    Array y(xd.shape());
    const real* px = xd.data();
    real* py = y.data();
    for (std::size_t i = 0; i < n; ++i) py[i] = px[i] * pm[i];
    return make_result(std::move(y), "dropout", {x}, [mask = std::move(mask)](const Array& grad_out, const Array&) {
        // in the forward pass this was: y = x · m; so dL/dx = dL/dy · m
        Array dx(grad_out.shape());
        const real* pg = grad_out.data();
        const real* pm = mask.data();
        real* pdx = dx.data();
        for (std::size_t i = 0; i < mask.size(); ++i) pdx[i] = pg[i] * pm[i];
        return make_grads(std::move(dx));
    });
}

}  // namespace functional

Dropout::Dropout(double p) : p_(p) { check_p(p, "Dropout"); }

}  // namespace xgrad::nn
