// nn/linear.hpp — the affine layer y = x Wᵀ + b: functional::linear and the Linear module.
//
//   x (..., in)  →  y (..., out),   weight W (out, in),   bias b (out)
//
// Initialisation as in PyTorch: W and b ~ U(-1/√in, 1/√in) (kaiming_uniform with a = √5
// reduces to this bound for W). ref: PyTorch docs, torch.nn.Linear
#pragma once

#include <cstdint>
#include <memory>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

namespace functional {
// y = x Wᵀ + b.   x (..., in), weight (out, in), bias (out) or undefined; y (..., out).
// Throws ValueError on mismatched sizes. ref: PyTorch docs, torch.nn.functional.linear
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
}  // namespace functional

class Embedding;
class Linear;
class LoRA;
class LoRAOptions;
void tie_weights(Linear& head, Embedding& table);  // nn/tying.hpp
LoRA& add_lora(Linear& layer, const LoRAOptions& options);  // nn/lora.hpp

class Linear : public Module {
public:
    // Throws ValueError if in_features or out_features is not positive, or the weight passes 2^60
    // elements; OutOfMemoryError if it cannot be allocated.
    Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);

    // x (..., in) → (..., out), plus the LoRA adapter's term if it has one (nn/lora.hpp). Throws
    // ValueError if x's last dim is not in_features, or if `weight` or `bias` was reassigned (the
    // optimizer would train the registered tensor, not it); share a table with nn::tie_weights
    // (nn/tying.hpp) instead.
    Tensor forward(const Tensor& x) const;

    std::int64_t in_features() const { return in_; }
    std::int64_t out_features() const { return out_; }
    // The adapter nn::add_lora gave this layer, or null.
    LoRA* lora() const { return lora_.get(); }
    // True once nn::tie_weights made W an Embedding's table.
    bool tied() const { return tied_; }

    // The registered parameters: change values in place (mutable_data(), nn::init), never reassign.
    Tensor weight;  // (out, in)
    Tensor bias;    // (out), or undefined when bias = false

protected:
    // Refuses a state dict while the adapter is merged, or one without the adapter to load (LoRAAdapter::check_state).
    void check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const override;
    bool has_state_check() const override { return lora_ != nullptr; }

private:
    friend void tie_weights(Linear& head, Embedding& table);
    friend LoRA& add_lora(Linear& layer, const LoRAOptions& options);

    std::int64_t in_, out_;
    bool has_bias_;
    std::shared_ptr<LoRA> lora_;
    bool tied_ = false;
};

}  // namespace xgrad::nn
