// core/gradcheck.cpp — analytic gradients against central finite differences.
#include <xgrad/core/gradcheck.hpp>

#include <cmath>
#include <random>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/reduction.hpp>

namespace xgrad {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
    check(std::isfinite(opt.eps()) && opt.eps() > 0, "gradcheck", "eps must be finite and > 0; got {}", opt.eps());
    check(std::isfinite(opt.atol()) && opt.atol() >= 0, "gradcheck", "atol must be finite and >= 0; got {}",
          opt.atol());
    check(std::isfinite(opt.rtol()) && opt.rtol() >= 0, "gradcheck", "rtol must be finite and >= 0; got {}",
          opt.rtol());
    bool any = false;
    for (const auto& t : inputs) any = any || t.requires_grad();
    check(any, "gradcheck", "no input requires grad");

    // Fixed projection weights w, drawn from a private generator so that the global one
    // (and with it the caller's reproducibility) is not disturbed.
    Tensor out = f(inputs);
    check(out.defined(), "gradcheck", "the function returned an undefined tensor");
    std::mt19937_64 gen(1234);
    std::uniform_real_distribution<double> unit(0.5, 1.5);
    Array w(out.data().shape());
    for (auto& v : w) v = static_cast<real>(unit(gen));

    // L = Σ w ⊙ out, evaluated in double without recording a graph.
    auto loss_value = [&]() {
        NoGradGuard no_grad;
        Tensor o = f(inputs);
        double acc = 0;
        for (std::size_t i = 0; i < w.size(); ++i) acc += double(w.data()[i]) * double(o.data().data()[i]);
        return acc;
    };

    // Analytic: one backward of L.
    for (auto t : inputs) if (t.requires_grad()) t.reset_grad();
    sum(mul(out, from_array(w))).backward();

    GradcheckResult r;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        Tensor x = inputs[k];
        if (!x.requires_grad()) continue;
        Array analytic = xt::zeros<real>(x.data().shape());
        if (x.sparse_grad()) analytic = x.sparse_grad()->to_dense();
        else if (x.grad().defined()) analytic = x.grad().data();
        for (std::size_t i = 0; i < x.data().size(); ++i) {
            real& xi = x.mutable_data().data()[i];
            const real saved = xi;
            xi = static_cast<real>(saved + opt.eps());
            const double plus = loss_value();
            xi = static_cast<real>(saved - opt.eps());
            const double minus = loss_value();
            xi = saved;
            const double numeric = (plus - minus) / (2 * opt.eps());
            const double a = analytic.data()[i];
            const double err = std::abs(a - numeric);
            r.max_abs_error = std::max(r.max_abs_error, err);
            ++r.checked;
            if ((!(err <= opt.atol() + opt.rtol() * std::abs(numeric))) && r.ok) {
                r.ok = false;
                r.message = fmt::format(
                    "gradcheck: input {} (shape {}), element {}: analytic {:.8g} vs numeric {:.8g} "
                    "(|diff| {:.3g} > atol {} + rtol {} * |numeric|)",
                    k, shape_str(x.shape()), i, a, numeric, err, opt.atol(), opt.rtol());
            }
        }
    }
    return r;
}

}  // namespace xgrad
