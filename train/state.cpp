// train/state.cpp — save and restore a whole training state (the file's layout and the checks are
// listed in state.hpp).
#include <xgrad/train/state.hpp>

#include <filesystem>
#include <system_error>

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/core/parse.hpp>

namespace xgrad::train {

namespace {
const std::string kModel = "model.", kOptim = "optim.", kStep = "train.step", kRng = "train.rng";
const std::string kSchedulerStep = "scheduler.step";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The "<prefix>..." entries of `all`, with the prefix taken off.
NamedTensors tensors_under(const NamedTensors& all, const std::string& prefix) {
    NamedTensors out;
    for (const auto& [name, t] : all)
        if (starts_with(name, prefix)) out.emplace_back(name.substr(prefix.size()), t);
    return out;
}
StringMap metadata_under(const nn::Metadata& all, const std::string& prefix) {
    StringMap out;
    for (auto it = all.lower_bound(prefix); it != all.end() && starts_with(it->first, prefix); ++it)
        out[it->first.substr(prefix.size())] = it->second;
    return out;
}

// The value of `key`; a file without it is refused.
std::string required(const std::string& path, const nn::Metadata& meta, const std::string& key) {
    auto it = meta.find(key);
    if (it == meta.end())
        throw std::runtime_error(fmt::format("{}: records no '{}'", path, key));
    return it->second;
}

// A file train::save wrote has "train.step"; a model's weights alone (nn::save_safetensors) have not.
void check_is_training_state(const std::string& path, const nn::Metadata& meta) {
    if (!meta.count(kStep))
        throw std::runtime_error(fmt::format("{}: not a training checkpoint (no '{}'): a file train::save wrote, "
                                             "not a model's weights alone",
                                             path, kStep));
}

// Strictly one decimal integer in [0, INT_MAX] (core/parse.hpp): std::stoi would read "5abc" as 5
// and "1e3" as 1.
int step_count(const std::string& path, const std::string& key, const std::string& saved) {
    const std::optional<std::int64_t> step = try_parse_int64(saved);
    if (!step || *step < 0 || *step > INT_MAX)
        throw std::runtime_error(fmt::format("{}: '{}' = {} is not a step count (a decimal integer in [0, {}])", path,
                                             key, quoted_text(saved), INT_MAX));
    return static_cast<int>(*step);
}

// The generator saved as text (generator_text, core/tensor.hpp).
std::mt19937_64 generator_of(const std::string& path, const std::string& saved) {
    const std::optional<std::mt19937_64> restored = generator_from_text(saved);
    if (!restored)
        throw std::runtime_error(fmt::format("{}: '{}' = {} is not a std::mt19937_64 state as operator<< writes it",
                                             path, kRng, quoted_text(saved)));
    return *restored;
}

// Refuses a file whose expected keys (LoadOptions::expect) hold other values than this run's.
void check_expected(const std::string& path, const nn::Metadata& meta, const LoadOptions& options) {
    for (const LoadOptions::Expected& group : options.expected())
        for (const auto& [name, value] : group.values) {
            auto it = meta.find(group.prefix + name);
            if (it == meta.end())
                throw std::runtime_error(fmt::format("{}: records no {} (a file written before the key existed), so "
                                                     "this run cannot be checked against it: train anew",
                                                     path, name));
            if (it->second != value)
                throw std::runtime_error(fmt::format(
                    "{}: saved with {} {}, but this run has {} {}; {}", path, name, it->second, name, value,
                    fmt::format(fmt::runtime(group.advice), fmt::arg("name", name), fmt::arg("saved", it->second),
                                fmt::arg("value", value))));
        }
    if (options.fingerprint())
        check_same_data(path, meta, *options.fingerprint(), options.resume());
}

// What a saved state always satisfies, so that an edited file whose checksum was recomputed is
// refused when it breaks one: finite weights; the step within options.max_step(); every
// parameter's Adam step count t <= the step (t counts the steps that gave it a gradient). The
// optimizer checks its buffers itself (finite, second moments >= 0).
void check_consistent(const std::string& path, const NamedTensors& model_state, const nn::Metadata& optim_meta,
                      int step, const LoadOptions& options) {
    const std::string bad = first_non_finite(model_state);
    if (!bad.empty())
        throw std::runtime_error(fmt::format("{}: '{}{}' holds a NaN or an infinity, which a run never saves: "
                                             "the file was altered",
                                             path, kModel, bad));
    if (options.max_step() && step > *options.max_step())
        throw std::runtime_error(fmt::format("{}: '{}' = {} is beyond this run's last step {}", path, kStep, step,
                                             *options.max_step()));
    const std::string suffix = ".step";
    for (const auto& [key, value] : optim_meta) {
        if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        const std::optional<std::int64_t> t = try_parse_int64(value);  // not a number: the optimizer refuses it
        if (t && *t > step)
            throw std::runtime_error(fmt::format("{}: '{}{}' = {} is more than the run's {} steps ('{}')", path, kOptim,
                                                 key, *t, step, kStep));
    }
}

// A detached copy of a module's values, to put back after a failed load.
NamedTensors snapshot(const nn::Module& model) {
    NamedTensors out;
    for (const auto& [name, t] : model.state_dict()) out.emplace_back(name, t.detach());
    return out;
}
// The name of the first array holding a NaN or an infinity, or "".
std::string first_non_finite(const std::vector<nn::ArrayRef>& arrays) {
    for (const auto& [name, a] : arrays) {
        const real* p = a->data();
        if (!std::all_of(p, p + a->size(), [](real v) { return std::isfinite(v); })) return name;
    }
    return "";
}
}  // namespace

std::string first_non_finite(const NamedTensors& tensors) {
    std::vector<nn::ArrayRef> arrays;
    for (const auto& [name, t] : tensors) arrays.push_back({name, &t.data()});
    return first_non_finite(arrays);
}

// ---- LoadOptions ---------------------------------------------------------------------------------
LoadOptions& LoadOptions::expect(std::string prefix, StringMap values, std::string advice) {
    expected_.push_back({std::move(prefix), std::move(values), std::move(advice)});
    return *this;
}
LoadOptions& LoadOptions::data(TextFingerprint now) {
    fingerprint_ = std::move(now);
    resume_ = true;
    return *this;
}
LoadOptions& LoadOptions::vocabulary(TextFingerprint now) {
    fingerprint_ = std::move(now);
    resume_ = false;
    return *this;
}
LoadOptions& LoadOptions::max_step(std::int64_t last_step) {
    max_step_ = last_step;
    return *this;
}

// ---- TrainingState -------------------------------------------------------------------------------
TrainingState::TrainingState(nn::Module& model, optim::Optimizer& optimizer)
    : model_(&model), model_to_load_(&model), optimizer_(&optimizer), optimizer_to_save_(&optimizer) {}

TrainingState::TrainingState(const nn::Module& model, const optim::Optimizer& optimizer)
    : model_(&model), optimizer_to_save_(&optimizer) {}

TrainingState::TrainingState(const nn::Module& model, const optim::OptimizerState& optimizer_state)
    : model_(&model), optimizer_state_(&optimizer_state) {}

TrainingState::TrainingState(nn::Module& model, std::function<void(const optim::OptimizerState&)> load_optimizer)
    : model_(&model), model_to_load_(&model), load_optimizer_(std::move(load_optimizer)) {}

TrainingState& TrainingState::step(int steps_taken) {
    check(steps_taken >= 0, "TrainingState::step", "{} steps taken: a count of steps is in [0, {}]", steps_taken,
          INT_MAX);
    step_ = steps_taken;
    return *this;
}
TrainingState& TrainingState::scheduler(optim::CosineWithWarmup& scheduler) {
    scheduler_ = &scheduler;
    return *this;
}
TrainingState& TrainingState::generator(std::mt19937_64& rng) {
    rng_ = rng_to_load_ = &rng;
    return *this;
}
TrainingState& TrainingState::generator(const std::mt19937_64& rng) {
    rng_ = &rng;
    rng_to_load_ = nullptr;
    return *this;
}
TrainingState& TrainingState::add(const std::string& name, std::function<StringMap()> save,
                                  std::function<void(const StringMap&)> load) {
    components_.push_back({name, std::move(save), std::move(load)});
    return *this;
}

// ---- save ----------------------------------------------------------------------------------------
void save(const std::string& path, const TrainingState& state, const nn::Metadata& metadata) {
    if (!state.optimizer_to_save_ && !state.optimizer_state_)
        throw std::logic_error(fmt::format("train::save {}: this TrainingState was made for loading only (it has "
                                           "a load function, not the optimizer's state)", path));
    // Every tensor is written from the array it lives in: the model's parameters and buffers, and
    // the optimizer's live buffers or the gathered state's tensors. Nothing is copied.
    const NamedTensors model_state = state.model_->state_dict();  // the module's own tensors, shared
    std::vector<nn::ArrayRef> arrays;
    for (const auto& [name, t] : model_state) arrays.push_back({kModel + name, &t.data()});
    const optim::Metadata& optim_meta =
        state.optimizer_to_save_ ? state.optimizer_to_save_->state_metadata() : state.optimizer_state_->metadata;
    if (state.optimizer_to_save_)
        for (const auto& [name, buffer] : state.optimizer_to_save_->state_buffers())
            arrays.push_back({kOptim + name, buffer});
    else
        for (const auto& [name, t] : state.optimizer_state_->tensors) arrays.push_back({kOptim + name, &t.data()});
    const std::string bad = first_non_finite(arrays);
    if (!bad.empty())
        throw std::runtime_error(fmt::format("{}: not saved: '{}' holds a NaN or an infinity (the run diverged); "
                                             "the file is left as it was",
                                             path, bad));

    nn::Metadata meta;
    for (const auto& [key, value] : optim_meta) meta[kOptim + key] = value;
    meta[kStep] = std::to_string(state.step_);
    if (state.rng_) meta[kRng] = generator_text(*state.rng_);
    if (state.scheduler_) meta[kSchedulerStep] = std::to_string(state.scheduler_->current_step());
    std::vector<std::string> names;
    for (const auto& c : state.components_) {
        if (std::find(names.begin(), names.end(), c.name) != names.end() || c.name == "model" || c.name == "optim" ||
            c.name == "train" || c.name == "scheduler")
            throw std::runtime_error(fmt::format("{}: not saved: a second component named '{}'", path, c.name));
        names.push_back(c.name);
        for (const auto& [key, value] : c.save()) meta[c.name + "." + key] = value;
    }
    // The caller's metadata may use none of the state's own prefixes.
    std::vector<std::string> reserved{kModel, kOptim, "train.", "scheduler."};
    for (const std::string& name : names) reserved.push_back(name + ".");
    for (const auto& [key, value] : metadata) {
        for (const std::string& prefix : reserved)
            if (starts_with(key, prefix))
                throw std::runtime_error(fmt::format("{}: not saved: the metadata key '{}' is the training state's "
                                                     "own ('{}...')", path, key, prefix));
        meta[key] = value;
    }
    nn::save_safetensors_arrays(path, arrays, meta);
}

// ---- load ----------------------------------------------------------------------------------------
int load(const std::string& path, TrainingState& state, const LoadOptions& options) {
    if (!state.model_to_load_ || (!state.optimizer_ && !state.load_optimizer_) || (state.rng_ && !state.rng_to_load_))
        throw std::logic_error(fmt::format("train::load {}: this TrainingState was made from const objects or a "
                                           "gathered optimizer state, for saving only", path));
    for (const auto& c : state.components_)
        if (!c.load)
            throw std::logic_error(fmt::format("train::load {}: the component '{}' was given const", path, c.name));

    // Everything is read and checked first.
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw std::runtime_error(fmt::format("{}: no training state to resume: the file does not exist (a first "
                                             "run writes it)", path));
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    check_is_training_state(path, file.metadata);
    check_expected(path, file.metadata, options);
    const int step = step_count(path, kStep, file.metadata.at(kStep));
    const NamedTensors model_state = tensors_under(file.tensors, kModel);
    optim::OptimizerState optim_state{tensors_under(file.tensors, kOptim), metadata_under(file.metadata, kOptim)};
    check_consistent(path, model_state, optim_state.metadata, step, options);
    std::optional<std::mt19937_64> rng;
    if (state.rng_to_load_) rng = generator_of(path, required(path, file.metadata, kRng));
    std::optional<int> scheduler_step;
    if (state.scheduler_)
        scheduler_step = step_count(path, kSchedulerStep, required(path, file.metadata, kSchedulerStep));
    for (const auto& c : state.components_)
        if (metadata_under(file.metadata, c.name + ".").empty() && !c.save().empty())
            throw std::runtime_error(fmt::format("{}: records no component '{}' (no '{}.*' metadata): it was saved "
                                                 "without one", path, c.name, c.name));

    // Then loaded: the model, the components, the optimizer last, since a sharded optimizer's load
    // cannot be undone; each load validates before it changes anything. A failure puts back what
    // was loaded before it.
    const NamedTensors model_before = snapshot(*state.model_);
    state.model_to_load_->load_state_dict(model_state);
    std::vector<StringMap> components_before;
    try {
        for (const auto& c : state.components_) {
            components_before.push_back(c.save());
            try {
                c.load(metadata_under(file.metadata, c.name + "."));
            } catch (const std::exception& e) {  // the component's message knows neither the file nor its name
                throw std::runtime_error(
                    fmt::format("{}: component '{}' (its '{}.*' metadata): {}", path, c.name, c.name, e.what()));
            }
        }
        if (state.optimizer_) state.optimizer_->load_state_dict(optim_state);
        else state.load_optimizer_(optim_state);
    } catch (...) {
        for (std::size_t i = components_before.size(); i-- > 0;) state.components_[i].load(components_before[i]);
        state.model_to_load_->load_state_dict(model_before);
        throw;
    }
    if (scheduler_step) state.scheduler_->set_step(*scheduler_step);
    if (rng) *state.rng_to_load_ = *rng;
    return step;
}

int load_model_weights(const std::string& path, nn::Module& model, const LoadOptions& options) {
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    check_is_training_state(path, file.metadata);
    check_expected(path, file.metadata, options);
    const int step = step_count(path, kStep, file.metadata.at(kStep));
    const NamedTensors model_state = tensors_under(file.tensors, kModel);
    check_consistent(path, model_state, {}, step, options);
    model.load_state_dict(model_state);
    return step;
}

}  // namespace xgrad::train
