// nn/module.cpp — registration of parameters, buffers and submodules, traversal, modes and
// checkpoints.
#include <xgrad/nn/module.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/nn/serialize.hpp>

namespace xgrad::nn {

namespace {
void check_name(const std::string& name, const char* op) {
    check(!name.empty() && name.find('.') == std::string::npos, op,
          "name '{}' must be non-empty and contain no '.'", name);
    // The names go into texts of one name per line (DDP's model check across ranks)
    const bool control = std::any_of(name.begin(), name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
    check(!control, op, "name {:?} must contain no control character (a newline, a tab, ...)", name);
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
    check_name(name, "register_parameter");
    check(tensor.defined(), "register_parameter", "parameter '{}' is an undefined tensor", name);
    check(tensor.is_leaf(), "register_parameter",
          "parameter '{}' must be a leaf tensor (detach() it first)", name);
    check_free(name, "register_parameter", "parameter");
    tensor.requires_grad_(requires_grad);
    // Its name and shape, for check_parameter_shape; a parent prefixes the name (add_child).
    tensor.impl()->param_name = name;
    tensor.impl()->param_shape = array_shape(tensor.data());
    params_.emplace_back(name, tensor);
    return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
    check_name(name, "register_buffer");
    check(tensor.defined(), "register_buffer", "buffer '{}' is an undefined tensor", name);
    check(tensor.is_leaf(), "register_buffer", "buffer '{}' must be a leaf tensor (detach() it first)", name);
    check_free(name, "register_buffer", "buffer");
    // A tensor requiring grad may be a parameter elsewhere: store a detached copy rather than
    // silently turning its requires_grad off.
    if (tensor.requires_grad()) tensor = tensor.detach();
    buffers_.emplace_back(name, tensor);
    return tensor;
}

// One namespace per module for parameters, buffers and submodules (a state dict name has one meaning).
void Module::check_free(const std::string& name, const char* op, const char* kind) const {
    // "parameter 'w' is already registered" for a repeat of the same kind;
    // "'w' is already a parameter's name" when another kind holds it.
    auto refuse = [&](const std::string& holder) {
        if (holder == kind) throw ValueError(fmt::format("{}: {} '{}' is already registered", op, kind, name));
        throw ValueError(fmt::format("{}: '{}' is already a {}'s name", op, name, holder));
    };
    for (const auto& [n, _] : params_)
        if (n == name) refuse("parameter");
    for (const auto& [n, _] : buffers_)
        if (n == name) refuse("buffer");
    const char* child = std::string(kind) == "module" ? "module" : "submodule";  // as the message reads
    for (const auto& [n, _] : children_)
        if (n == name) refuse(child);
}

const Tensor& Module::registered_parameter(const std::string& name) const {
    for (const auto& [n, t] : params_) {
        if (n != name) continue;
        check_parameter_shape(*t.impl(), "forward");
        return t;
    }
    throw ValueError(fmt::format("registered_parameter: this module has no parameter '{}'", name));
}

void Module::replace_parameter(const std::string& name, Tensor tensor) {
    check(tensor.defined() && tensor.is_leaf(), "replace_parameter",
          "parameter '{}' must be replaced by a defined leaf tensor", name);
    for (auto& [n, t] : params_) {
        if (n != name) continue;
        t = std::move(tensor);
        if (t.impl()->param_name.empty()) t.impl()->param_name = name;
        t.impl()->param_shape = array_shape(t.data());
        return;
    }
    throw ValueError(fmt::format("replace_parameter: this module has no parameter '{}'", name));
}

// The walks below use an explicit stack, never recursion: a deep tree cannot overflow the stack.

// True if `target` is this module or one of its descendants.
bool Module::contains(const Module* target) const {
    std::vector<const Module*> pending{this};
    while (!pending.empty()) {
        const Module* m = pending.back();
        pending.pop_back();
        if (m == target) return true;
        for (const auto& [_, child] : m->children_) pending.push_back(child.get());
    }
    return false;
}

// Each solely owned child hands its children to this loop first, so destructors never nest.
Module::~Module() {
    std::vector<std::shared_ptr<Module>> pending;
    for (auto& [_, child] : children_) pending.push_back(std::move(child));
    children_.clear();
    while (!pending.empty()) {
        std::shared_ptr<Module> m = std::move(pending.back());
        pending.pop_back();
        if (m.use_count() == 1) {  // the last owner: m dies at the end of this iteration
            for (auto& [_, child] : m->children_) pending.push_back(std::move(child));
            m->children_.clear();
        }
    }
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
    check_name(name, "register_module");
    check(module != nullptr, "register_module", "module '{}' is null", name);
    // A module inside itself would make the walks endless and the shared_ptr cycle leak.
    check(!module->contains(this), "register_module",
          "module '{}' is this module or one of its ancestors; a module tree cannot have a cycle", name);
    check_free(name, "register_module", "module");
    for (const auto& [child_name, p] : module->named_parameters()) p.impl()->param_name = name + "." + child_name;
    children_.emplace_back(name, std::move(module));
}

// Pre-order: own parameters (then buffers), then each child's subtree, in registration order.
// One frame per module on the path (module, next child, prefix length); the prefix "a.b." grows
// on the way down and is cut back on the way up.
void Module::collect(const std::string& prefix, bool with_params, bool with_buffers, NamedTensors& out) const {
    struct Frame {
        const Module* module;
        std::size_t next_child;
        std::size_t prefix_size;
    };
    std::string path = prefix;
    auto own = [&](const Module& m) {
        if (with_params)
            for (const auto& [name, t] : m.params_) out.emplace_back(path + name, t);
        if (with_buffers)
            for (const auto& [name, t] : m.buffers_) out.emplace_back(path + name, t);
    };
    own(*this);
    std::vector<Frame> stack{{this, 0, path.size()}};
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next_child == f.module->children_.size()) {
            stack.pop_back();
            continue;
        }
        const auto& [name, child] = f.module->children_[f.next_child++];
        path.resize(f.prefix_size);
        path += name + ".";
        own(*child);
        stack.push_back({child.get(), 0, path.size()});
    }
}

namespace {
// A tensor under two names (a tied weight) is listed once, as PyTorch, so it is stepped once.
NamedTensors first_names(NamedTensors all) {
    std::set<const TensorImpl*> seen;
    NamedTensors out;
    for (auto& [name, t] : all)
        if (seen.insert(t.impl()).second) out.emplace_back(std::move(name), std::move(t));
    return out;
}
}  // namespace

NamedTensors Module::named_parameters() const {
    NamedTensors all;
    collect("", true, false, all);
    return first_names(std::move(all));
}

NamedTensors Module::named_buffers() const {
    NamedTensors all;
    collect("", false, true, all);
    return first_names(std::move(all));
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto& [_, t] : named_parameters()) out.push_back(t);
    return out;
}

std::size_t Module::num_parameters() const {
    std::size_t n = 0;
    for (const auto& [_, t] : named_parameters()) n += t.numel();
    return n;
}

void Module::train(bool on) {
    std::vector<Module*> pending{this};  // iterative, as contains()
    while (!pending.empty()) {
        Module* m = pending.back();
        pending.pop_back();
        m->training_ = on;
        for (auto& [_, child] : m->children_) pending.push_back(child.get());
    }
}

void Module::zero_grad(bool set_to_none) {
    for (auto& [_, t] : named_parameters()) {
        if (set_to_none) clear_grad(*t.impl());
        else zero_grad_(*t.impl());  // a row-sparse gradient keeps k = 0 rows
    }
}

void Module::check_state(const std::string&, const std::set<std::string>*, const char*) const {}

// Depth first without recursion, as contains(), keeping the names along the current branch: a path
// is spelt out only for a module that checks its state (every path of a chain n deep would copy
// n²/2 names).
void Module::check_states(const std::set<std::string>* loading, const char* op) const {
    struct Pending {
        const Module* module;
        std::size_t depth;        // its parent's names on the branch
        const std::string* name;  // null for the root
    };
    std::vector<Pending> pending{{this, 0, nullptr}};
    std::vector<const std::string*> branch;
    while (!pending.empty()) {
        const Pending p = pending.back();
        pending.pop_back();
        branch.resize(p.depth);
        if (p.name) branch.push_back(p.name);
        if (p.module->has_state_check()) {
            std::string path;
            for (const std::string* name : branch) path += (path.empty() ? "" : ".") + *name;
            p.module->check_state(path, loading, op);
        }
        for (auto it = p.module->children_.rbegin(); it != p.module->children_.rend(); ++it)
            pending.push_back({it->second.get(), branch.size(), &it->first});
    }
}

NamedTensors Module::state_dict() const {
    check_states(nullptr, "state_dict");
    NamedTensors all;
    collect("", true, true, all);
    return first_names(std::move(all));
}

void Module::load_state_dict(const NamedTensors& state) {
    // Validate everything first, so that a bad entry leaves every parameter as it was.
    std::map<std::string, const Tensor*> given;
    std::set<std::string> names;
    for (const auto& [name, t] : state) {
        check(given.emplace(name, &t).second, "load_state_dict", "duplicate entry '{}'", name);
        names.insert(name);
    }
    check_states(&names, "load_state_dict");
    NamedTensors own = state_dict();
    std::set<std::string> buffer_names;
    for (const auto& [name, _] : named_buffers()) buffer_names.insert(name);
    for (const auto& [name, p] : own) {
        const char* kind = buffer_names.count(name) ? "buffer" : "parameter";
        auto it = given.find(name);
        check(it != given.end(), "load_state_dict", "missing {} '{}' (shape {})", kind, name,
              shape_str(p.shape()));
        check(it->second->defined() && it->second->shape() == p.shape(), "load_state_dict",
              "{} '{}' has shape {} in the model but {} in the state dict", kind, name,
              shape_str(p.shape()),
              it->second->defined() ? shape_str(it->second->shape()) : std::string("(undefined)"));
        given.erase(it);
    }
    check(given.empty(), "load_state_dict", "unexpected entry '{}' not in the model",
          given.empty() ? std::string() : given.begin()->first);
    std::map<std::string, const Tensor*> by_name;
    for (const auto& [name, t] : state) by_name[name] = &t;
    for (auto& [name, p] : own) p.mutable_data() = by_name.at(name)->data();  // same shape: a plain copy
}

void Module::save(const std::string& path) const {
    save_safetensors(path, state_dict(), {{"format", "pt"}});
}

void Module::load(const std::string& path, const LoadOptions& options) {
    load_state_dict(load_safetensors(path, options).tensors);
}

}  // namespace xgrad::nn
