// nn/sequential.hpp — Sequential: modules applied in order, y = f_n(...f_2(f_1(x))).
//
//     auto net = std::make_shared<nn::Sequential>();
//     net->push_back("fc1", std::make_shared<nn::Linear>(30, 256))
//         .push_back("act", std::make_shared<nn::Tanh>())
//         .push_back("fc2", std::make_shared<nn::Linear>(256, 27));
//     Tensor logits = net->forward(x);      // parameters: "fc1.weight", "fc1.bias", ...
//
// Any module with `Tensor forward(const Tensor&)` can be added; each is registered.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

class Sequential : public Module {
public:
    template <class M>
    Sequential& push_back(const std::string& name, std::shared_ptr<M> module) {
        register_module(name, module);
        layers_.push_back([module](const Tensor& x) { return module->forward(x); });
        return *this;
    }
    // Named by position: "0", "1", ...
    template <class M>
    Sequential& push_back(std::shared_ptr<M> module) {
        return push_back(std::to_string(layers_.size()), std::move(module));
    }

    Tensor forward(const Tensor& x) const {
        Tensor y = x;
        for (const auto& layer : layers_) y = layer(y);
        return y;
    }
    std::size_t size() const { return layers_.size(); }

private:
    std::vector<std::function<Tensor(const Tensor&)>> layers_;
};

}  // namespace xgrad::nn
