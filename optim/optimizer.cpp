// optim/optimizer.cpp — the Optimizer base: groups, step() dispatch, zero_grad, state dicts.
//
// step() is a template method: it validates every gradient first (so a failing step changes
// nothing), then hands each parameter's .data() array, its gradient and its ParamState to the
// algorithm's update_dense or update_sparse. The algorithms never call a Tensor op, so no
// step can be recorded in the autograd graph.
//
// Legend: V rows, d width, k rows of a row-sparse gradient, t step count, g group index.
#include <xgrad/optim/optimizer.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_set>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/parse.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad::optim {

namespace {


// The largest step count a state dict may hold: 2^53, the last integer up to which every
// integer is exactly a double.
constexpr std::int64_t kMaxStep = std::int64_t(1) << 53;

// Shortest decimal form that reads back to the same double (fmt uses Dragonbox), so
// "0.001" and "1e-08" round-trip exactly through a state dict.
std::string to_decimal(double v) { return fmt::format("{}", v); }

// Two option strings agree if they are equal, or both numbers with the same value
// ("0.9" and "0.90"), each spelled strictly (core/parse.hpp).
bool same_option(const std::string& a, const std::string& b) {
    if (a == b) return true;
    const std::optional<double> x = try_parse_double(a), y = try_parse_double(b);
    return x && y && *x == *y;
}

// ---- reading a saved state ----------------------------------------------------------------------
// A state being loaded: its metadata and tensors, and which of them were read (the rest are refused).
class StateReader {
public:
    StateReader(const OptimizerState& state, std::string op) : state_(state), op_(std::move(op)) {}
    const char* op() const { return op_.c_str(); }
    bool has(const std::string& key) const { return state_.metadata.count(key) > 0; }

    // The value of metadata `key`; throws ValueError if there is none.
    const std::string& get(const std::string& key) {
        auto it = state_.metadata.find(key);
        check(it != state_.metadata.end(), op(), "the state has no metadata key '{}'", key);
        used_keys_.insert(key);
        return it->second;
    }

    // Indexes the tensors by name; throws ValueError for a name that appears twice.
    void index_tensors() {
        for (const auto& [name, t] : state_.tensors)
            check(tensors_.emplace(name, &t).second, op(), "tensor '{}' appears twice in the state", name);
    }

    // The tensor `name`, or null if there is none.
    const Tensor* tensor(const std::string& name) {
        auto it = tensors_.find(name);
        if (it == tensors_.end()) return nullptr;
        used_tensors_.insert(name);
        return it->second;
    }

    // Throws ValueError naming the tensors, else the metadata keys, that were never read.
    void check_all_read() const {
        std::vector<std::string> unknown;
        for (const auto& [name, t] : tensors_)
            if (!used_tensors_.count(name)) unknown.push_back(name);
        check(unknown.empty(), op(), "the state has tensors this optimizer does not expect: {}",
              fmt::join(unknown, ", "));
        for (const auto& [key, value] : state_.metadata)
            if (!used_keys_.count(key)) unknown.push_back(key);
        check(unknown.empty(), op(), "the state has metadata keys this optimizer does not expect: {}",
              fmt::join(unknown, ", "));
    }

private:
    const OptimizerState& state_;
    std::string op_;
    std::map<std::string, const Tensor*> tensors_;
    std::set<std::string> used_keys_, used_tensors_;
};

// Group g's (lr, weight_decay), each finite and >= 0.
std::pair<double, double> read_group_hyper(StateReader& in, std::size_t g) {
    const std::string lr_key = fmt::format("group.{}.lr", g);
    const std::string wd_key = fmt::format("group.{}.weight_decay", g);
    const double lr = parse_double(in.get(lr_key), in.op(), lr_key);
    const double wd = parse_double(in.get(wd_key), in.op(), wd_key);
    check(std::isfinite(lr) && lr >= 0 && std::isfinite(wd) && wd >= 0, in.op(),
          "group {} has lr {} and weight_decay {}; both must be finite and >= 0", g, lr, wd);
    return {lr, wd};
}

// The invariants a saved buffer of any step keeps: every value finite (a step that overflowed is
// never saved) and, for a second moment (a running mean of squared gradients), >= 0.
void check_buffer_values(const Array& a, const std::string& key, bool second_moment, const char* op) {
    const real* v = a.data();
    for (std::size_t i = 0; i < a.size(); ++i) {
        check(std::isfinite(v[i]), op, "tensor '{}' holds {} at element {}: an optimizer's state is finite", key, v[i], i);
        check(!second_moment || v[i] >= 0, op, "tensor '{}' holds {} at element {}: a second moment (a mean of "
              "squares) is >= 0", key, v[i], i);
    }
}

// Parameter `name`'s state, saved in group g: all of its buffers or none, each of p's shape, and its
// step count t when the algorithm counts steps (present exactly when the buffers are).
ParamState read_param_state(StateReader& in, const std::string& name, const Tensor& p, std::size_t g,
                            const std::vector<std::string>& buffers, bool counts_steps) {
    check(in.has(name + ".group"), in.op(), "parameter '{}' (param group {}) is not in the state", name, g);
    const std::int64_t saved_group = parse_int64(in.get(name + ".group"), in.op(), name + ".group");
    check(saved_group == static_cast<std::int64_t>(g), in.op(),
          "parameter '{}' is in param group {} in the state but in group {} here", name, saved_group, g);
    ParamState st;
    std::vector<std::string> present, missing;
    for (const auto& b : buffers) {
        const Tensor* t = in.tensor(name + "." + b);
        if (!t) {
            missing.push_back(name + "." + b);
            continue;
        }
        check(t->defined() && t->shape() == p.shape(), in.op(),
              "tensor '{}' has shape {} but parameter '{}' has shape {}", name + "." + b,
              t->defined() ? shape_str(t->shape()) : std::string("(undefined)"), name, shape_str(p.shape()));
        *st.buffer(b) = t->data();  // a copy
        check_buffer_values(*st.buffer(b), name + "." + b, b == "exp_avg_sq" || b == "max_exp_avg_sq", in.op());
        present.push_back(name + "." + b);
    }
    check(present.empty() || missing.empty(), in.op(), "the state has {} but not {}", fmt::join(present, ", "),
          fmt::join(missing, ", "));
    st.initialized = !present.empty();
    if (!counts_steps) return st;
    const std::string step_key = name + ".step";
    const bool has_step = in.has(step_key);
    check(has_step == st.initialized, in.op(), "parameter '{}': the state has {} but {}", name,
          has_step ? "a step count" : "no step count", st.initialized ? "has buffers" : "no buffers");
    if (has_step) {
        // 1 <= t <= 2^53: exact as the double of Adam's 1 − β^t, and far from overflowing int64 at t + 1.
        const std::string& text = in.get(step_key);
        st.step = parse_int64(text, in.op(), step_key);
        check(st.step >= 1 && st.step <= kMaxStep, in.op(),
              "'{}' = {} is outside [1, 2^53 = {}]: a stepped parameter has t >= 1, and larger counts "
              "would lose exactness in Adam's bias correction and overflow", step_key, text, kMaxStep);
    }
    return st;
}

}  // namespace

const Array* ParamState::buffer(const std::string& name) const {
    if (name == "exp_avg") return &exp_avg;
    if (name == "exp_avg_sq") return &exp_avg_sq;
    if (name == "max_exp_avg_sq") return &max_exp_avg_sq;
    if (name == "momentum_buffer") return &momentum_buffer;
    return nullptr;
}

Array* ParamState::buffer(const std::string& name) {
    return const_cast<Array*>(static_cast<const ParamState&>(*this).buffer(name));
}

// ---- construction --------------------------------------------------------------------------------

NamedTensors named_by_module(const std::vector<Tensor>& params) {
    NamedTensors named;
    std::set<std::string> taken;
    for (std::size_t i = 0; i < params.size(); ++i) {
        const Tensor& p = params[i];
        std::string name = p.defined() ? p.impl()->param_name : std::string();
        if (name.empty() || !taken.insert(name).second) name = fmt::format("param.{}", i);
        named.emplace_back(std::move(name), p);
    }
    return named;
}

Optimizer::Optimizer(std::string kind, std::vector<ParamGroup> groups, double default_lr,
                     double default_weight_decay)
    : kind_(std::move(kind)), default_lr_(default_lr), default_weight_decay_(default_weight_decay) {
    std::size_t count = 0;
    for (const auto& g : groups) count += g.params.size();
    check(count > 0, kind_.c_str(), "got an empty parameter list");
    for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::check_group(const ParamGroup& group, std::size_t index) const {
    const char* op = kind_.c_str();
    check(std::isfinite(*group.lr) && *group.lr >= 0, op,
          "invalid learning rate {} in param group {}; need a finite lr >= 0", *group.lr, index);
    check(std::isfinite(*group.weight_decay) && *group.weight_decay >= 0, op,
          "invalid weight_decay {} in param group {}; need a finite weight_decay >= 0",
          *group.weight_decay, index);
    std::set<std::string> names;
    std::unordered_set<const TensorImpl*> tensors;
    for (const auto& g : groups_) {
        for (const auto& [name, p] : g.params) {
            names.insert(name);
            tensors.insert(p.impl());
        }
    }
    for (const auto& [name, p] : group.params) {
        check(p.defined(), op, "parameter '{}' is an undefined tensor", name);
        check(p.is_leaf(), op, "cannot optimize '{}': it is not a leaf (it has a grad_fn)", name);
        check(names.insert(name).second, op,
              "parameter name '{}' appears twice; state dicts need unique names", name);
        check(tensors.insert(p.impl()).second, op,
              "parameter '{}' is a tensor that appears in the parameter list twice", name);
    }
}

void Optimizer::add_param_group(ParamGroup group) {
    if (!group.lr) group.lr = default_lr_;
    if (!group.weight_decay) group.weight_decay = default_weight_decay_;
    check_group(group, groups_.size());
    groups_.push_back(std::move(group));
}

// ---- step and zero_grad --------------------------------------------------------------------------

void Optimizer::step() { step(nullptr); }

void Optimizer::check_step(const std::function<bool(const Tensor& param)>& only) const {
    const std::string op = kind_ + ".step";
    auto skipped = [&](const Tensor& p) { return only && !only(p); };
    for (const auto& group : groups_) {
        const double lr = group.lr.value_or(NAN), wd = group.weight_decay.value_or(NAN);
        check(std::isfinite(lr) && lr >= 0 && std::isfinite(wd) && wd >= 0, op.c_str(),
              "a param group has lr {} and weight_decay {}; both must be set, finite and >= 0", lr, wd);
        for (const auto& [name, p] : group.params) {
            if (skipped(p)) continue;
            const TensorImpl& t = *p.impl();
            check_parameter_shape(t, op.c_str());
            // State of another shape: the parameter was resized (set_data) after steps.
            if (auto it = state_.find(name); it != state_.end() && it->second.initialized) {
                for (const char* b : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"}) {
                    const Array* buf = it->second.buffer(b);
                    check(buf == nullptr || buf->size() == 0 || buf->shape() == t.data.shape(), op.c_str(),
                          "'{}' has shape {} but its {} has shape {}: the parameter was resized after "
                          "steps; build a new optimizer for it", name, lazy_shape(t.data.shape()), b,
                          lazy_shape(buf ? buf->shape() : t.data.shape()));
                }
            }
            if (t.sparse_grad) {
                check(!t.grad, op.c_str(), "'{}' has both a dense and a row-sparse gradient", name);
                const SparseGrad& sg = *t.sparse_grad;
                const ArrayShape shape = array_shape(t.data);
                check(sg.dense_shape == to_shape(shape) && shape.size() == 2, op.c_str(),
                      "'{}': row-sparse gradient of dense shape {} for a parameter of shape {}", name,
                      lazy_shape(sg.dense_shape), lazy_shape(shape));
                const std::size_t k = sg.indices.size();
                check(k == 0 || (sg.values.dimension() == 2 && sg.values.shape()[0] == k &&
                                 sg.values.shape()[1] == shape[1]),
                      op.c_str(), "'{}': row-sparse gradient values of shape {} for {} indices of width {}",
                      name, lazy_shape(sg.values.shape()), k, shape[1]);
                for (std::size_t i = 0; i < k; ++i) {
                    const std::int64_t row = sg.indices[i];
                    check_index(row >= 0 && static_cast<std::size_t>(row) < shape[0], op.c_str(),
                                "'{}': gradient row {} at position {} out of range [0, {})", name, row,
                                i, shape[0]);
                    // The message's arguments are evaluated before the condition: no indices[i - 1] at i = 0.
                    const std::int64_t previous = i == 0 ? -1 : sg.indices[i - 1];
                    check(i == 0 || previous < row, op.c_str(),
                          "'{}': gradient row indices must be sorted and unique (coalesced); "
                          "{} follows {} at position {}", name, row, previous, i);
                }
                check_sparse_supported(name);
            } else if (t.grad) {
                check(t.grad->data.shape() == t.data.shape(), op.c_str(),
                      "'{}': gradient of shape {} for a parameter of shape {}", name,
                      lazy_shape(t.grad->data.shape()), lazy_shape(t.data.shape()));
            }
        }
    }
}

void Optimizer::step(const std::function<bool(const Tensor& param)>& only) {
    const profiler::LaneGuard lane(profiler::Lane::optimizer);  // the profiler's optimizer lane
    const profiler::detail::Scope event{profiler::detail::active() ? profiler::detail::begin(kind_ + ".step", profiler::Kind::optimizer)
                                                                   : profiler::detail::Handle{}};
    check_step(only);  // 1. everything validated first: a throw leaves parameters and state untouched
    auto skipped = [&](const Tensor& p) { return only && !only(p); };
    // 2. Update. ParamState is created at a parameter's first gradient, never before.
    for (const auto& group : groups_) {
        for (const auto& [name, p] : group.params) {
            if (skipped(p)) continue;
            TensorImpl& t = *p.impl();
            if (!t.grad && !t.sparse_grad) {
                auto it = state_.find(name);
                if (it != state_.end()) {
                    it->second.last_update = LastUpdate::none;
                    it->second.rows_touched = 0;
                }
                continue;
            }
            ParamState& st = state_[name];
            ++t.version;  // an in-place change: a graph recorded before this step can no longer backward
            if (t.sparse_grad) {
                update_sparse(group, t.data, *t.sparse_grad, st);
                st.last_update = LastUpdate::sparse;
                st.rows_touched = t.sparse_grad->indices.size();
            } else {
                update_dense(group, t.data, t.grad->data, st);
                st.last_update = LastUpdate::dense;
                st.rows_touched = t.data.dimension() == 0 ? 1 : t.data.shape()[0];
            }
            st.initialized = true;
        }
    }
}

void Optimizer::zero_grad(bool set_to_none) {
    const profiler::LaneGuard lane(profiler::Lane::optimizer);
    const profiler::RecordFunction event("zero_grad", profiler::Kind::optimizer);
    for (auto& group : groups_) {
        for (auto& [name, p] : group.params) {
            if (set_to_none) clear_grad(*p.impl());
            else zero_grad_(*p.impl());  // a row-sparse gradient keeps k = 0 rows
        }
    }
}

// ---- state dict ------------------------------------------------------------------------------------

Metadata Optimizer::state_metadata() const {
    Metadata md;
    md["optimizer"] = kind_;
    for (const auto& [key, value] : options_metadata()) md[key] = value;
    md["param_groups"] = std::to_string(groups_.size());
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        md[fmt::format("group.{}.lr", g)] = to_decimal(*groups_[g].lr);
        md[fmt::format("group.{}.weight_decay", g)] = to_decimal(*groups_[g].weight_decay);
        for (const auto& [name, p] : groups_[g].params) {
            md[name + ".group"] = std::to_string(g);
            const ParamState* st = state_of(name);
            if (st && counts_steps()) md[name + ".step"] = std::to_string(st->step);
        }
    }
    return md;
}

const ParamState* Optimizer::state_of(const std::string& name) const {
    auto it = state_.find(name);
    return it == state_.end() || !it->second.initialized ? nullptr : &it->second;
}

std::vector<std::pair<std::string, const Array*>> Optimizer::state_buffers() const {
    std::vector<std::pair<std::string, const Array*>> out;  // "<param>.<buffer>", param_groups() order
    const std::vector<std::string> buffers = state_buffer_names();
    for (const auto& group : groups_)
        for (const auto& [name, p] : group.params)
            if (const ParamState* st = state_of(name))
                for (const auto& b : buffers) out.emplace_back(name + "." + b, st->buffer(b));
    return out;
}

OptimizerState Optimizer::state_dict() const {
    OptimizerState s;
    s.metadata = state_metadata();
    for (const auto& [name, buffer] : state_buffers()) s.tensors.emplace_back(name, from_array(*buffer));  // a copy
    return s;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
    StateReader in(state, kind_ + ".load_state_dict");
    const char* op = in.op();
    // The same algorithm, options and number of groups.
    const std::string& saved_kind = in.get("optimizer");
    check(saved_kind == kind_, op, "the state is from optimizer '{}', this one is '{}'", saved_kind, kind_);
    for (const auto& [key, mine] : options_metadata()) {
        const std::string& saved = in.get(key);
        check(same_option(saved, mine), op,
              "option '{}' is {} in the state but {} in this optimizer; construct the optimizer "
              "with the saved options", key, saved, mine);
    }
    const std::int64_t n_groups = parse_int64(in.get("param_groups"), op, "param_groups");
    check(n_groups == static_cast<std::int64_t>(groups_.size()), op,
          "the state has {} param groups, this optimizer has {}", n_groups, groups_.size());
    in.index_tensors();

    // Build the new state aside; commit only when everything has been checked.
    std::vector<std::pair<double, double>> new_hyper;  // (lr, weight_decay) per group
    std::map<std::string, ParamState> new_state;
    const std::vector<std::string> buffers = state_buffer_names();
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        new_hyper.push_back(read_group_hyper(in, g));
        for (const auto& [name, p] : groups_[g].params) {
            ParamState st = read_param_state(in, name, p, g, buffers, counts_steps());
            if (st.initialized) new_state.emplace(name, std::move(st));
        }
    }
    in.check_all_read();

    // Commit (nothing below can throw but allocation).
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        groups_[g].lr = new_hyper[g].first;
        groups_[g].weight_decay = new_hyper[g].second;
    }
    state_ = std::move(new_state);
}

}  // namespace xgrad::optim
