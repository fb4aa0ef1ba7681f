// optim/sgd.cpp — SGD with momentum, the algorithm of torch.optim.SGD (PyTorch docs):
//
//   g ← ∇θ L(θ)                                          the gradient
//   g ← g + λ·θ                       if λ ≠ 0           L2 weight decay, added to the gradient
//   if μ ≠ 0:
//       b ← g                         at the first step  (no zero-initialised buffer, no damping)
//       b ← μ·b + (1 − τ)·g           afterwards         momentum μ, dampening τ
//       g ← g + μ·b                   if nesterov
//       g ← b                         otherwise
//   θ ← θ − γ·g                                          learning rate γ
//
// (Sutskever et al. 2013 write the momentum step as v ← μ·v + γ·g, θ ← θ − v; PyTorch and
// this file scale by γ after the buffer, which differs when γ changes between steps.)
//
// Legend: n elements of a parameter, V rows, d width, k rows of a row-sparse gradient.
#include <xgrad/optim/sgd.hpp>

#include <cmath>

namespace xgrad::optim {

namespace {

const SGDOptions& validated_sgd(const SGDOptions& o) {
    check(std::isfinite(o.lr()) && o.lr() >= 0, "SGD", "invalid learning rate {}; need a finite lr >= 0", o.lr());
    check(std::isfinite(o.momentum()) && o.momentum() >= 0, "SGD",
          "invalid momentum {}; need momentum >= 0", o.momentum());
    check(std::isfinite(o.dampening()), "SGD", "invalid dampening {}; need a finite value",
          o.dampening());
    check(std::isfinite(o.weight_decay()) && o.weight_decay() >= 0, "SGD",
          "invalid weight_decay {}; need weight_decay >= 0", o.weight_decay());
    check(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), "SGD",
          "Nesterov momentum requires a momentum > 0 and zero dampening; got momentum {}, "
          "dampening {}", o.momentum(), o.dampening());
    return o;
}

// One fused pass over n elements: p (n), g (n) read-only, b (n) or null when μ = 0. It calls no
// Tensor op, so autograd records nothing.
void sgd_kernel(real* p, const real* g, real* b, std::size_t n, real lr, real wd, real mu,
                real damp, bool nesterov, bool first) {
    for (std::size_t i = 0; i < n; ++i) {
        real d = g[i] + wd * p[i];                  // g + λ·θ
        if (b) {
            b[i] = first ? d : mu * b[i] + (1 - damp) * d;  // b ← g  |  b ← μ·b + (1 − τ)·g
            d = nesterov ? d + mu * b[i] : b[i];              // g + μ·b  |  b
        }
        p[i] -= lr * d;                             // θ ← θ − γ·g
    }
}

}  // namespace

SGD::SGD(NamedTensors params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

SGD::SGD(const std::vector<Tensor>& params, SGDOptions options) : SGD(named_by_module(params), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer("SGD", std::move(groups), validated_sgd(defaults).lr(), defaults.weight_decay()),
      options_(defaults) {}

void SGD::update_dense(const ParamGroup& group, Array& param, const Array& grad, ParamState& st) {
    const bool first = !st.initialized;
    real* b = nullptr;
    if (options_.momentum() != 0) {
        if (first) st.momentum_buffer = Array(param.shape());  // filled with g by the kernel
        b = st.momentum_buffer.data();
    }
    sgd_kernel(param.data(), grad.data(), b, param.size(), static_cast<real>(*group.lr),
               static_cast<real>(*group.weight_decay), static_cast<real>(options_.momentum()),
               static_cast<real>(options_.dampening()), options_.nesterov(), first);
}

// Momentum is 0 here (check_sparse_supported): each of the k rows is a plain SGD step on
// its d elements; the other V − k rows are not read and do not move.
void SGD::update_sparse(const ParamGroup& group, Array& param, const SparseGrad& grad, ParamState&) {
    const std::size_t d = param.shape()[1];
    for (std::size_t j = 0; j < grad.indices.size(); ++j) {
        const auto row = static_cast<std::size_t>(grad.indices[j]);
        sgd_kernel(param.data() + row * d, grad.values.data() + j * d, nullptr, d,
                   static_cast<real>(*group.lr), static_cast<real>(*group.weight_decay), 0, 0, false,
                   false);
    }
}

void SGD::check_sparse_supported(const std::string& param_name) const {
    check(options_.momentum() == 0, "SGD.step",
          "'{}' has a row-sparse gradient, which SGD supports only with momentum = 0 (got {}); "
          "use a dense gradient (nn::Embedding with sparse=false) or momentum 0",
          param_name, options_.momentum());
}

std::vector<std::string> SGD::state_buffer_names() const {
    if (options_.momentum() == 0) return {};
    return {"momentum_buffer"};
}

Metadata SGD::options_metadata() const {
    return {{"momentum", fmt::format("{}", options_.momentum())},
            {"dampening", fmt::format("{}", options_.dampening())},
            {"nesterov", options_.nesterov() ? "true" : "false"}};
}

}  // namespace xgrad::optim
