// optim/sgd.hpp — stochastic gradient descent with momentum, dampening, Nesterov momentum and
// L2 weight decay: PyTorch's torch.optim.SGD, step for step (the formula is in optim/sgd.cpp).
//
//     optim::SGD opt(model.named_parameters(), optim::SGDOptions(0.1).momentum(0.9));
//
// Legend: n elements of a parameter, k rows of a row-sparse gradient.
#pragma once

#include <xgrad/optim/optimizer.hpp>

namespace xgrad::optim {

// Options with LibTorch's names and PyTorch's defaults; setters chain, getters share the name.
class SGDOptions {
public:
    explicit SGDOptions(double lr) : lr_(lr) {}  // lr has no default, as in PyTorch

    SGDOptions& lr(double v) { lr_ = v; return *this; }
    SGDOptions& momentum(double v) { momentum_ = v; return *this; }
    SGDOptions& dampening(double v) { dampening_ = v; return *this; }
    SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
    SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }

    double lr() const { return lr_; }                      // γ            (required)
    double momentum() const { return momentum_; }          // μ, ≥ 0       (default 0)
    double dampening() const { return dampening_; }        // τ            (default 0)
    double weight_decay() const { return weight_decay_; }  // λ, ≥ 0, L2   (default 0)
    bool nesterov() const { return nesterov_; }            //              (default false)

private:
    double lr_;
    double momentum_ = 0;
    double dampening_ = 0;
    double weight_decay_ = 0;
    bool nesterov_ = false;
};

// State per parameter: the momentum buffer b (n elements) when momentum ≠ 0.
// Row-sparse gradients: with momentum = 0 only the k rows change, p_r ← p_r − γ·(g_r + λ·p_r).
// With momentum ≠ 0 step() throws ValueError: a lazy buffer would not be PyTorch's SGD.
class SGD : public Optimizer {
public:
    // Throws ValueError for lr < 0, momentum < 0, weight_decay < 0, non-finite values, nesterov
    // without momentum > 0 and dampening = 0, and the base-class conditions.
    SGD(NamedTensors params, SGDOptions options);
    SGD(const std::vector<Tensor>& params, SGDOptions options);  // names: named_by_module
    SGD(std::vector<ParamGroup> groups, SGDOptions defaults);

    const SGDOptions& options() const { return options_; }
    std::vector<std::string> state_buffer_names() const override;
    bool counts_steps() const override { return false; }

protected:
    void update_dense(const ParamGroup& group, Array& param, const Array& grad,
                      ParamState& state) override;
    void update_sparse(const ParamGroup& group, Array& param, const SparseGrad& grad,
                       ParamState& state) override;
    void check_sparse_supported(const std::string& param_name) const override;
    Metadata options_metadata() const override;

private:
    SGDOptions options_;
};

}  // namespace xgrad::optim
