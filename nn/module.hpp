// nn/module.hpp — Module: a named tree of parameters and submodules, as in PyTorch.
//
// A model is a class deriving from Module. Its constructor registers what it owns:
//
//     struct MLP : nn::Module {
//         std::shared_ptr<nn::Linear> fc1, fc2;
//         MLP() {
//             fc1 = register_module("fc1", std::make_shared<nn::Linear>(10, 20));
//             fc2 = register_module("fc2", std::make_shared<nn::Linear>(20, 2));
//         }
//         Tensor forward(const Tensor& x) { return fc2->forward(fc1->forward(x).tanh()); }
//     };
//
// named_parameters() walks that tree and yields "fc1.weight", "fc1.bias", "fc2.weight", ...
// in registration order. A submodule stored but never registered is invisible to parameters(),
// the optimizer and save(): a test of num_parameters() against a hand count guards that.
// Lists of submodules: nn::Sequential (with a forward) and nn::ModuleList (without).
//
// A buffer is state that is not learned (a fixed table, running statistics): in state_dict()
// and checkpoints, never in parameters(), never requiring grad.
// ref: PyTorch docs, torch.nn.Module and torch.nn.Module.register_buffer
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

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

    // Registers `tensor` as a buffer called `name` (no dots, unique among this module's
    // parameters, buffers and submodules). A buffer never requires grad: a tensor that does is
    // stored as a copy (detach()), and the caller's tensor is left as it was (it may be a
    // parameter elsewhere). Returns the handle stored: the same one, or that copy. Throws
    // ValueError on a bad name, an undefined tensor or a non-leaf tensor.
    // ref: PyTorch docs, torch.nn.Module.register_buffer (persistent buffers only)
    Tensor register_buffer(const std::string& name, Tensor tensor);

    // Registers a child module; its parameters appear as "<name>.<param>". Returns `module`.
    // Throws ValueError on a bad name, a null module, or a cycle (`module` is this module or
    // one of its ancestors).
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    // All parameters of this module and its descendants, depth first: each module's own
    // parameters in registration order, then its children's. A tensor reachable under two
    // names (a tied weight, a module registered twice) appears once, under its first name.
    NamedTensors named_parameters() const;
    std::vector<Tensor> parameters() const;
    // Σ numel over parameters(): the number of learned scalars.
    std::size_t num_parameters() const;
    // All buffers of this module and its descendants, named and ordered as named_parameters().
    NamedTensors named_buffers() const;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
        return children_;
    }

    // Training mode flag, set recursively on every submodule. nn::Dropout reads it: after
    // train() (the default) it drops elements, after eval() it is the identity.
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    // Drops (set_to_none = true, PyTorch's default) or zero-fills every parameter's gradient.
    void zero_grad(bool set_to_none = true);

    // ---- checkpoints ---------------------------------------------------------------------
    // The parameters and buffers by dotted name: each module's parameters, then its buffers,
    // then its children's, as PyTorch orders them. A tensor reachable under two names (a tied
    // weight, nn/tying.hpp) appears once, under its first name, so a checkpoint stores it
    // once. The handles are shared, not copied.
    NamedTensors state_dict() const;
    // Copies values into the parameters and buffers, by name. Strict: every entry of
    // state_dict() must be present with the same shape and no unknown name may appear;
    // otherwise throws ValueError naming the missing, unexpected or mis-shaped entry, and the
    // module is left untouched.
    void load_state_dict(const NamedTensors& state);
    // Writes the state dict as safetensors (nn/serialize.hpp), atomically: a temporary file
    // in the same directory, then a rename. Throws std::runtime_error on I/O failure.
    void save(const std::string& path) const;
    // Reads a safetensors file and load_state_dict()s it. A missing, truncated or corrupted
    // file, or a wrong name or shape, throws and leaves the module untouched.
    void load(const std::string& path);

protected:
    // The tensor registered as this module's own parameter `name` (not a descendant's).
    // Throws ValueError if there is none. Modules whose forward reads a public member
    // (Linear::weight) use it to check that the member still is the registered tensor.
    const Tensor& registered_parameter(const std::string& name) const;
    // Replaces the tensor registered as this module's own parameter `name` (which must
    // exist), keeping its place in the order. Used by nn::tie_weights.
    void replace_parameter(const std::string& name, Tensor tensor);

private:
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    // Throws ValueError if `name` is already taken by a parameter, buffer or submodule here.
    void check_free(const std::string& name, const char* op, const char* kind) const;
    // Appends (prefix + name, tensor) for the parameters (and buffers, if `with_buffers`) of
    // this module and its descendants, in state_dict order, without removing duplicates.
    void collect(const std::string& prefix, bool with_params, bool with_buffers, NamedTensors& out) const;
    bool contains(const Module* target) const;

    NamedTensors params_;
    NamedTensors buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

}  // namespace xgrad::nn
