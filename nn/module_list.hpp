// nn/module_list.hpp — ModuleList: modules held in a list and registered by position.
//
//     auto h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
//     for (int i = 0; i < n_layer; ++i) h->push_back(std::make_shared<Block>(config));
//     for (const auto& block : *h) x = block->forward(x);   // parameters "h.0.…", "h.1.…"
//
// No forward: the owner calls its children, as PyTorch's nn.ModuleList (nanoGPT's transformer.h).
// M is the children's type, so h[i] is an M.
// ref: PyTorch docs, torch.nn.ModuleList
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <xgrad/core/error.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

template <class M = Module>
class ModuleList : public Module {
public:
    // Appends module, registered under its position: "0", "1", ...
    void push_back(std::shared_ptr<M> module) {
        modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
    }
    std::size_t size() const { return modules_.size(); }
    // Throws ValueError for i outside [0, size()).
    const std::shared_ptr<M>& operator[](std::size_t i) const {
        check(i < modules_.size(), "ModuleList", "index {} out of range [0, {})", i, modules_.size());
        return modules_[i];
    }
    auto begin() const { return modules_.begin(); }
    auto end() const { return modules_.end(); }

private:
    std::vector<std::shared_ptr<M>> modules_;
};

}  // namespace xgrad::nn
