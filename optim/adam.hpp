// optim/adam.hpp — Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019), with
// PyTorch's defaults and algorithms (torch.optim.Adam, torch.optim.AdamW), amsgrad, and a
// lazy update for row-sparse gradients. The update, step by step, is in optim/adam.cpp.
//
//     optim::Adam  opt(model.named_parameters(), optim::AdamOptions(3e-3));
//     optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
//
// Legend: n elements of a parameter, V rows of an embedding table, d its width,
//         k rows present in a row-sparse gradient, t the parameter's step count.
#pragma once

#include <tuple>

#include <xgrad/optim/optimizer.hpp>

namespace xgrad::optim {

// Options with LibTorch's names and PyTorch's defaults; setters chain, getters share the name.
// Checked when the optimizer is constructed: lr ≥ 0, eps ≥ 0, 0 ≤ β1, β2 < 1, weight_decay ≥ 0.
class AdamOptions {
public:
    explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}

    AdamOptions& lr(double v) { lr_ = v; return *this; }
    AdamOptions& betas(std::tuple<double, double> v) { betas_ = v; return *this; }
    AdamOptions& eps(double v) { eps_ = v; return *this; }
    AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
    AdamOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }

    double lr() const { return lr_; }                                // γ  (1e-3)
    const std::tuple<double, double>& betas() const { return betas_; }  // (β1, β2)  (0.9, 0.999)
    double eps() const { return eps_; }                              // ε  (1e-8)
    double weight_decay() const { return weight_decay_; }            // λ, L2 in the gradient (0)
    bool amsgrad() const { return amsgrad_; }                        // (false)

private:
    double lr_;
    std::tuple<double, double> betas_{0.9, 0.999};
    double eps_ = 1e-8;
    double weight_decay_ = 0;
    bool amsgrad_ = false;
};

// The same options for AdamW; only the default weight decay differs (1e-2, decoupled).
class AdamWOptions {
public:
    explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}

    AdamWOptions& lr(double v) { lr_ = v; return *this; }
    AdamWOptions& betas(std::tuple<double, double> v) { betas_ = v; return *this; }
    AdamWOptions& eps(double v) { eps_ = v; return *this; }
    AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
    AdamWOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }

    double lr() const { return lr_; }                                // γ  (1e-3)
    const std::tuple<double, double>& betas() const { return betas_; }  // (β1, β2)  (0.9, 0.999)
    double eps() const { return eps_; }                              // ε  (1e-8)
    double weight_decay() const { return weight_decay_; }            // λ, decoupled (1e-2)
    bool amsgrad() const { return amsgrad_; }                        // (false)

private:
    double lr_;
    std::tuple<double, double> betas_{0.9, 0.999};
    double eps_ = 1e-8;
    double weight_decay_ = 1e-2;
    bool amsgrad_ = false;
};

namespace detail {

struct AdamHyper {
    double beta1, beta2, eps;
    bool amsgrad;
    bool decoupled;  // false: Adam's L2 (g ← g + λ·θ); true: AdamW's θ ← θ − γ·λ·θ
};

// What Adam and AdamW share: moments, bias correction, amsgrad, the lazy sparse path.
// Only where the weight decay enters differs (`decoupled`).
class AdamBase : public Optimizer {
public:
    std::vector<std::string> state_buffer_names() const override;
    bool counts_steps() const override { return true; }

protected:
    AdamBase(std::string kind, std::vector<ParamGroup> groups, double lr, double weight_decay,
             AdamHyper hyper);

    void update_dense(const ParamGroup& group, Array& param, const Array& grad,
                      ParamState& state) override;
    void update_sparse(const ParamGroup& group, Array& param, const SparseGrad& grad,
                       ParamState& state) override;
    void check_sparse_supported(const std::string& param_name) const override;
    Metadata options_metadata() const override;

private:
    AdamHyper hyper_;
};

}  // namespace detail

// Adam: per parameter m and v (n elements each; v_max with amsgrad) and a step count t. Weight
// decay is L2 in the gradient, g ← g + λ·θ, as torch.optim.Adam.
// Row-sparse gradients are applied lazily, as PyTorch's SparseAdam: only the k rows present
// update their m, v and θ (and decay). t counts the tensor's steps with a gradient (any k), so
// a row first touched at t = 50 is corrected with 1 − β^50. ε is added after the correction,
// as in the dense update, so touching every row every step equals the dense update. amsgrad
// with a sparse gradient throws ValueError (as SparseAdam).
class Adam : public detail::AdamBase {
public:
    // Throws ValueError for lr < 0, eps < 0, β outside [0, 1), weight_decay < 0, non-finite
    // values, and the base-class conditions.
    Adam(NamedTensors params, AdamOptions options = AdamOptions());
    Adam(const std::vector<Tensor>& params, AdamOptions options = AdamOptions());  // named_by_module
    Adam(std::vector<ParamGroup> groups, AdamOptions defaults = AdamOptions());
    const AdamOptions& options() const { return options_; }

private:
    AdamOptions options_;
};

// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019), as torch.optim.AdamW:
//     Adam:   g ← g + λ·θ,  then  θ ← θ − γ·m̂/(√v̂ + ε)          (λ·θ passes through m and v)
//     AdamW:  θ ← θ − γ·λ·θ, then  θ ← θ − γ·m̂/(√v̂ + ε)          (m and v see only ∇L)
// Same state and sparse semantics as Adam.
class AdamW : public detail::AdamBase {
public:
    AdamW(NamedTensors params, AdamWOptions options = AdamWOptions());
    AdamW(const std::vector<Tensor>& params, AdamWOptions options = AdamWOptions());  // named_by_module
    AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = AdamWOptions());
    const AdamWOptions& options() const { return options_; }

private:
    AdamWOptions options_;
};

}  // namespace xgrad::optim
