// optim/adam.cpp — the Adam update (Kingma & Ba 2015, Algorithm 1) as torch.optim.Adam and
// torch.optim.AdamW compute it, and its lazy form for row-sparse gradients.
//
// One step of one parameter θ (n elements), t counting this parameter's steps:
//
//   t  ← t + 1
//   g  ← ∇θ L                                       the gradient
//   θ  ← θ − γ·λ·θ                 (AdamW)          decoupled weight decay (Loshchilov & Hutter 2019)
//   g  ← g + λ·θ                   (Adam)           L2 penalty folded into the gradient
//   m  ← β1·m + (1 − β1)·g                          first moment: running mean of g
//   v  ← β2·v + (1 − β2)·g²                         second moment: running mean of g²
//   m̂  = m / (1 − β1^t)                             bias correction: m, v start at 0, so early
//   v̂  = v / (1 − β2^t)                             averages are too small by 1 − β^t
//   v_max ← max(v_max, v)          (amsgrad)        then v̂ = v_max / (1 − β2^t)
//                                                   (Reddi et al. 2018, as PyTorch: max of the
//                                                   raw v, corrected afterwards)
//   θ  ← θ − γ · m̂ / (√v̂ + ε)
//
// The last line is evaluated as Kingma & Ba arrange it (end of section 2), one division per
// element: with b2 = √(1 − β2^t), γ · m̂ / (√v̂ + ε) = [γ · b2 / (1 − β1^t)] · m / (√v + ε · b2).
// One fused pass over raw pointers reads and writes each array once, and calls no Tensor op,
// so the update is never recorded by autograd.
//
// Legend: n elements, V rows, d width, k rows present in a row-sparse gradient.
#include <xgrad/optim/adam.hpp>

#include <algorithm>
#include <cmath>
#include <xtensor/xbuilder.hpp>

#include <xgrad/core/parallel.hpp>

namespace xgrad::optim {

namespace {

template <class Options>
const Options& validated(const Options& o, const char* kind) {
    const auto [beta1, beta2] = o.betas();
    check(std::isfinite(o.lr()) && o.lr() >= 0, kind, "invalid learning rate {}; need a finite lr >= 0", o.lr());
    check(std::isfinite(o.eps()) && o.eps() >= 0, kind, "invalid eps {}; need eps >= 0", o.eps());
    check(beta1 >= 0 && beta1 < 1, kind, "invalid beta1 {} (betas index 0); need 0 <= beta1 < 1", beta1);
    check(beta2 >= 0 && beta2 < 1, kind, "invalid beta2 {} (betas index 1); need 0 <= beta2 < 1", beta2);
    check(std::isfinite(o.weight_decay()) && o.weight_decay() >= 0, kind,
          "invalid weight_decay {}; need weight_decay >= 0", o.weight_decay());
    return o;
}

// Per-step scalars, computed once in double from t and the options, then rounded to `real`.
struct Coefficients {
    real beta1, beta2, one_minus_beta1, one_minus_beta2;
    real step_size;      // γ · √(1 − β2^t) / (1 − β1^t)
    real eps;            // ε · √(1 − β2^t)
    real l2;             // λ for Adam, 0 for AdamW
    real decay;          // 1 − γ·λ for AdamW, 1 for Adam
};

// The update of n consecutive elements: θ, m, v, v_max (null unless amsgrad) in place.
void adam_kernel(real* p, const real* grad, real* m, real* v, real* v_max, std::size_t n,
                 const Coefficients& c) {
    for (std::size_t i = 0; i < n; ++i) {
        const real theta = p[i] * c.decay;                             // θ − γ·λ·θ   (AdamW)
        const real g = grad[i] + c.l2 * theta;                         // g + λ·θ     (Adam)
        m[i] = c.beta1 * m[i] + c.one_minus_beta1 * g;                 // m ← β1·m + (1 − β1)·g
        v[i] = c.beta2 * v[i] + c.one_minus_beta2 * g * g;             // v ← β2·v + (1 − β2)·g²
        real v_used = v[i];
        if (v_max) v_used = v_max[i] = std::max(v_max[i], v[i]);       // amsgrad: v_max
        p[i] = theta - c.step_size * m[i] / (std::sqrt(v_used) + c.eps);  // θ − γ·m̂/(√v̂ + ε)
    }
}

// Allocates m, v (and v_max) as zeros at the parameter's first step, advances t, and
// returns this step's scalars. t counts the steps of this parameter tensor.
Coefficients begin_step(const ParamGroup& group, const Array& param, const detail::AdamHyper& h,
                        ParamState& st) {
    if (!st.initialized) {
        const ArrayShape shape(param.shape().begin(), param.shape().end());
        st.exp_avg = zeros_array(shape);  // (on huge pages when large: rows are updated at random)
        st.exp_avg_sq = zeros_array(shape);
        if (h.amsgrad) st.max_exp_avg_sq = zeros_array(shape);
        st.step = 0;
    }
    st.step += 1;                                                      // t ← t + 1
    const double t = static_cast<double>(st.step);
    const double bc1 = 1 - std::pow(h.beta1, t);                       // 1 − β1^t
    const double bc2 = 1 - std::pow(h.beta2, t);                       // 1 − β2^t
    Coefficients c{};
    c.beta1 = static_cast<real>(h.beta1);
    c.beta2 = static_cast<real>(h.beta2);
    c.one_minus_beta1 = static_cast<real>(1 - h.beta1);
    c.one_minus_beta2 = static_cast<real>(1 - h.beta2);
    c.step_size = static_cast<real>(*group.lr * std::sqrt(bc2) / bc1);  // γ · √(1 − β2^t) / (1 − β1^t)
    c.eps = static_cast<real>(h.eps * std::sqrt(bc2));                 // ε · √(1 − β2^t)
    c.l2 = h.decoupled ? real(0) : static_cast<real>(*group.weight_decay);
    c.decay = h.decoupled ? static_cast<real>(1 - *group.lr * *group.weight_decay) : real(1);
    return c;
}

}  // namespace

namespace detail {

AdamBase::AdamBase(std::string kind, std::vector<ParamGroup> groups, double lr,
                   double weight_decay, AdamHyper hyper)
    : Optimizer(std::move(kind), std::move(groups), lr, weight_decay), hyper_(hyper) {}

void AdamBase::update_dense(const ParamGroup& group, Array& param, const Array& grad,
                            ParamState& st) {
    const Coefficients c = begin_step(group, param, hyper_, st);
    real* v_max = hyper_.amsgrad ? st.max_exp_avg_sq.data() : nullptr;
    // Each element is updated alone: shared out over the threads of core/parallel.hpp.
    parallel_for_values(param.size(), [&](std::size_t i0, std::size_t i1) {
        adam_kernel(param.data() + i0, grad.data() + i0, st.exp_avg.data() + i0, st.exp_avg_sq.data() + i0,
                    v_max ? v_max + i0 : nullptr, i1 - i0, c);
    });
}

// The lazy update: the same kernel on each of the k rows present in the gradient (d elements
// each), with the tensor's t. The other V − k rows of θ, m and v are not read and do not
// change: their moments are not decayed, and (AdamW) their weights are not decayed either.
void AdamBase::update_sparse(const ParamGroup& group, Array& param, const SparseGrad& grad,
                             ParamState& st) {
    const Coefficients c = begin_step(group, param, hyper_, st);
    const std::size_t d = param.shape()[1];
    const std::size_t k = grad.indices.size();
    // The k rows lie scattered over θ, m and v beyond the caches, in an order the hardware
    // cannot guess: each row's θ, m and v are requested kAhead rows early.
    constexpr std::size_t kAhead = 4;
    auto prefetch_row = [d](const real* row) {
        const char* bytes = reinterpret_cast<const char*>(row);
        for (std::size_t b = 0; b < d * sizeof(real); b += 64) __builtin_prefetch(bytes + b, /*write=*/1);
    };
    for (std::size_t j = 0; j < k; ++j) {
        if (j + kAhead < k) {
            const std::size_t ahead = static_cast<std::size_t>(grad.indices[j + kAhead]) * d;
            prefetch_row(param.data() + ahead);
            prefetch_row(st.exp_avg.data() + ahead);
            prefetch_row(st.exp_avg_sq.data() + ahead);
        }
        const std::size_t off = static_cast<std::size_t>(grad.indices[j]) * d;  // row start
        adam_kernel(param.data() + off, grad.values.data() + j * d, st.exp_avg.data() + off,
                    st.exp_avg_sq.data() + off, nullptr, d, c);
    }
}

void AdamBase::check_sparse_supported(const std::string& param_name) const {
    check(!hyper_.amsgrad, (name() + ".step").c_str(),
          "'{}' has a row-sparse gradient, and amsgrad does not support row-sparse gradients "
          "(nor does PyTorch's SparseAdam); use amsgrad=false or a dense gradient", param_name);
}

std::vector<std::string> AdamBase::state_buffer_names() const {
    if (hyper_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    return {"exp_avg", "exp_avg_sq"};
}

Metadata AdamBase::options_metadata() const {
    return {{"beta1", fmt::format("{}", hyper_.beta1)},
            {"beta2", fmt::format("{}", hyper_.beta2)},
            {"eps", fmt::format("{}", hyper_.eps)},
            {"amsgrad", hyper_.amsgrad ? "true" : "false"}};
}

}  // namespace detail

// ---- Adam and AdamW: the options, checked, then the shared machinery ---------------------------------

Adam::Adam(NamedTensors params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

Adam::Adam(const std::vector<Tensor>& params, AdamOptions options) : Adam(named_by_module(params), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o)
    : AdamBase("Adam", std::move(groups), validated(o, "Adam").lr(), o.weight_decay(),
               {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.amsgrad(), false}),
      options_(o) {}

AdamW::AdamW(NamedTensors params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params)}}, options) {}

AdamW::AdamW(const std::vector<Tensor>& params, AdamWOptions options) : AdamW(named_by_module(params), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions o)
    : AdamBase("AdamW", std::move(groups), validated(o, "AdamW").lr(), o.weight_decay(),
               {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.amsgrad(), true}),
      options_(o) {}

}  // namespace xgrad::optim
