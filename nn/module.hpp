// nn/module.hpp — Module: a named tree of parameters and submodules, as in PyTorch.
//
// A model derives from Module; its constructor registers what it owns:
//     struct MLP : nn::Module {
//         std::shared_ptr<nn::Linear> fc1, fc2;
//         MLP() {
//             fc1 = register_module("fc1", std::make_shared<nn::Linear>(10, 20));
//             fc2 = register_module("fc2", std::make_shared<nn::Linear>(20, 2));
//         }
//         Tensor forward(const Tensor& x) { return fc2->forward(fc1->forward(x).tanh()); }
//     };
// named_parameters() yields "fc1.weight", "fc1.bias", "fc2.weight", ... in registration order; a
// submodule never registered is invisible to parameters(), the optimizer and save(). A buffer is
// state that is not learned: in state_dict(), never in parameters(), never grad.
// ref: PyTorch docs, torch.nn.Module
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/serialize.hpp>

namespace xgrad::nn {

class Module {
public:
    Module() = default;
    virtual ~Module();  // frees a deep tree without recursion (nn/module.cpp)
    Module(const Module&) = delete;  // parameters are shared handles: copying would alias them
    Module& operator=(const Module&) = delete;

    // Registers `tensor` as a parameter called `name` (no dots, unique in this module) and
    // sets its requires_grad. Returns the same handle. Throws ValueError on a bad name.
    Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);

    // Registers `tensor` as a buffer called `name` (no dots, unique here). A tensor requiring
    // grad is stored as a detach()ed copy, the caller's left as it was; returns the handle stored.
    // Throws ValueError on a bad name, an undefined or a non-leaf tensor.
    // ref: PyTorch docs, torch.nn.Module.register_buffer (persistent buffers only)
    Tensor register_buffer(const std::string& name, Tensor tensor);

    // Registers a child module; its parameters appear as "<name>.<param>". Returns `module`.
    // Throws ValueError on a bad name, a null module, or a cycle (`module` is an ancestor).
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    // Depth first: each module's own parameters in registration order, then its children's.
    // A tensor under two names (a tied weight) appears once, under its first name.
    NamedTensors named_parameters() const;
    std::vector<Tensor> parameters() const;
    // Σ numel over parameters(): the number of learned scalars.
    std::size_t num_parameters() const;
    // All buffers of this module and its descendants, named and ordered as named_parameters().
    NamedTensors named_buffers() const;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
        return children_;
    }

    // Training mode, set recursively (nn::Dropout is the identity after eval()).
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    // Drops (set_to_none = true, PyTorch's default) or zero-fills every parameter's gradient in
    // place; a row-sparse one stays, with k = 0 rows (as Optimizer::zero_grad).
    void zero_grad(bool set_to_none = true);

    // ---- checkpoints ---------------------------------------------------------------------
    // Parameters and buffers by dotted name, in PyTorch's order (own parameters, own buffers,
    // children's); a tied weight appears once. The handles are shared, not copied.
    NamedTensors state_dict() const;
    // Copies values in by name, strictly: a missing, unexpected or mis-shaped entry throws
    // ValueError naming it, and the module is left untouched.
    void load_state_dict(const NamedTensors& state);
    // Writes safetensors (nn/serialize.hpp) atomically; throws std::runtime_error on I/O failure.
    void save(const std::string& path) const;
    // load_state_dict() of a safetensors file; a bad file, name or shape throws, module untouched.
    // A file without xgrad's checksum (written by another tool) needs
    // nn::LoadOptions().require_checksum(false) (nn/serialize.hpp).
    void load(const std::string& path, const LoadOptions& options = LoadOptions());

protected:
    // Called by state_dict() and load_state_dict() on every module of the tree with its dotted path
    // ("" for the root) before anything is read or copied; `loading`: the names given to
    // load_state_dict, null for state_dict(). Throws ValueError naming `op` for a state that cannot be
    // saved or loaded as it stands (a merged LoRA adapter, nn/lora.hpp); the default accepts.
    virtual void check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const;
    // True if check_state has something to check here (the walk spells out the path for those alone).
    virtual bool has_state_check() const { return false; }

    // Own parameter `name`, to check a public member is still registered. Throws ValueError if
    // there is none, or if its array was resized since registration (check_parameter_shape).
    const Tensor& registered_parameter(const std::string& name) const;
    // Replaces own parameter `name` in place in the order (nn::tie_weights).
    void replace_parameter(const std::string& name, Tensor tensor);

private:
    void check_states(const std::set<std::string>* loading, const char* op) const;  // check_state, tree-wide
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    // Throws ValueError if `name` is already taken by a parameter, buffer or submodule here.
    void check_free(const std::string& name, const char* op, const char* kind) const;
    // Appends (prefix + name, tensor) in state_dict order, duplicates kept.
    void collect(const std::string& prefix, bool with_params, bool with_buffers, NamedTensors& out) const;
    bool contains(const Module* target) const;

    NamedTensors params_;
    NamedTensors buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

}  // namespace xgrad::nn
