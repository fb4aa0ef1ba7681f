// train/state.hpp — a whole training state in one file: what torch.save of a dict of the model's,
// the optimizer's and the scheduler's state_dicts, the step and the generator is in PyTorch.
//
//   train::TrainingState state(model, opt);                  // references to the live objects
//   state.scheduler(sched).generator(rng).add("sampler", sampler);
//   train::save(path, state.step(step), {{"flag.--lr", "0.003"}});
//   ...
//   int step = train::load(path, state, train::LoadOptions().expect("flag.", flags, "pass {name} {saved}"));
//
// The file's tensors and metadata are listed above save(); examples/gpt/README.md, "Checkpoints:
// resume, train further, sample", shows it in use.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/module.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/optim/lr_scheduler.hpp>
#include <xgrad/optim/optimizer.hpp>
#include <xgrad/train/fingerprint.hpp>

namespace xgrad::train {

// A component's state: what a data sampler's state_dict() returns, e.g. {"epoch", "3"}.
using StringMap = std::map<std::string, std::string>;

// What a load checks beyond the file's own consistency; setters chain, as LibTorch's options.
class LoadOptions {
public:
    // Every "<prefix><name>" key must hold values[name], e.g. expect("flag.", {{"--lr", "0.003"}}, ...).
    // A mismatch throws "<path>: saved with <name> <saved>, but this run has <name> <value>; <advice>",
    // where `advice` may name {name}, {saved} and {value} (fmt's named arguments: "pass {name}
    // {saved}"); a missing key throws "<path>: records no <name> (a file written before the key
    // existed), so this run cannot be checked against it: train anew".
    LoadOptions& expect(std::string prefix, StringMap values, std::string advice);
    // The data the ids must mean: the vocabulary, the text's length and hash, the tokenizer
    // (check_same_data, fingerprint.hpp). vocabulary(): the vocabulary and tokenizer only (a new
    // run on another text that starts from saved weights).
    LoadOptions& data(TextFingerprint now);
    LoadOptions& vocabulary(TextFingerprint now);
    // "train.step" above `last_step` is refused (a file this run cannot have written).
    LoadOptions& max_step(std::int64_t last_step);

    struct Expected {
        std::string prefix;
        StringMap values;
        std::string advice;
    };
    const std::vector<Expected>& expected() const { return expected_; }
    const std::optional<TextFingerprint>& fingerprint() const { return fingerprint_; }
    bool resume() const { return resume_; }  // data(): the text is checked too
    const std::optional<std::int64_t>& max_step() const { return max_step_; }

private:
    std::vector<Expected> expected_;
    std::optional<TextFingerprint> fingerprint_;
    bool resume_ = false;
    std::optional<std::int64_t> max_step_;
};

class TrainingState;
void save(const std::string& path, const TrainingState& state, const nn::Metadata& metadata = {});
int load(const std::string& path, TrainingState& state, const LoadOptions& options = LoadOptions());

// What a run must restore to continue exactly. It refers to the objects; it owns nothing, so they
// must outlive it. A state made from const objects (a const model, a const generator, a sharded
// optimizer's gathered state) can be saved, not loaded into: load throws std::logic_error.
class TrainingState {
public:
    // From the live objects: save writes the optimizer's buffers straight from where they live
    // (optim::Optimizer::state_buffers), with no copy of the state; load restores them.
    TrainingState(nn::Module& model, optim::Optimizer& optimizer);
    // The same for saving only (a const model or optimizer).
    TrainingState(const nn::Module& model, const optim::Optimizer& optimizer);
    // For saving a sharded optimizer (distributed::ZeroRedundancyOptimizer): its whole state, as
    // its collective state_dict() gathers it; the file is the same as one process's optimizer's.
    TrainingState(const nn::Module& model, const optim::OptimizerState& optimizer_state);
    // For loading a sharded optimizer: `load_optimizer` gets the whole saved state and keeps each
    // rank's part (ZeroRedundancyOptimizer::load_state_dict, collective: every rank calls load).
    // It must change nothing when it throws; the model and components are then put back.
    TrainingState(nn::Module& model, std::function<void(const optim::OptimizerState&)> load_optimizer);

    TrainingState& step(int steps_taken);  // ValueError for a negative count
    int step() const { return step_; }
    TrainingState& scheduler(optim::CosineWithWarmup& scheduler);
    TrainingState& generator(std::mt19937_64& rng);
    TrainingState& generator(const std::mt19937_64& rng);
    // A named component with `StringMap state_dict() const` and `void load_state_dict(const
    // StringMap&)`, e.g. a data sampler, saved as metadata "<name>.<key>". Its load must change
    // nothing when it throws. A const object can be saved only.
    template <class Stateful>
    TrainingState& add(const std::string& name, Stateful& object) {
        return add(name, [&object] { return object.state_dict(); },
                   [&object](const StringMap& map) { object.load_state_dict(map); });
    }
    template <class Stateful>
    TrainingState& add(const std::string& name, const Stateful& object) {
        return add(name, [&object] { return object.state_dict(); }, nullptr);
    }
    template <class Stateful>
    TrainingState& add(const std::string&, const Stateful&&) = delete;  // a temporary would dangle
    // The same with the two functions given; `load` may be empty (save only).
    TrainingState& add(const std::string& name, std::function<StringMap()> save,
                       std::function<void(const StringMap&)> load);

private:
    struct Component {
        std::string name;
        std::function<StringMap()> save;
        std::function<void(const StringMap&)> load;
    };
    friend void save(const std::string& path, const TrainingState& state, const nn::Metadata& metadata);
    friend int load(const std::string& path, TrainingState& state, const LoadOptions& options);

    const nn::Module* model_;
    nn::Module* model_to_load_ = nullptr;
    optim::Optimizer* optimizer_ = nullptr;               // to load into
    const optim::Optimizer* optimizer_to_save_ = nullptr;  // to save from, without a copy
    const optim::OptimizerState* optimizer_state_ = nullptr;
    std::function<void(const optim::OptimizerState&)> load_optimizer_;
    int step_ = 0;
    optim::CosineWithWarmup* scheduler_ = nullptr;
    const std::mt19937_64* rng_ = nullptr;
    std::mt19937_64* rng_to_load_ = nullptr;
    std::vector<Component> components_;
};

// ---- the file --------------------------------------------------------------------------------------
// One safetensors file (nn/serialize.hpp: checksummed, written atomically); in Python
// safetensors.torch.load_file(path) gives the tensors under PyTorch's names and layouts.
//   tensors   "model.<name>"            nn::Module::state_dict(), e.g. "model.fc1.weight"
//             "optim.<param>.<buffer>"  optim::OptimizerState's tensors, e.g. "optim.fc1.weight.exp_avg"
//   metadata  "optim.<key>"             its metadata: the options, "<param>.step", ...
//             "train.step"              the steps taken, a decimal integer in [0, INT_MAX]
//             "train.rng"               with generator(): std::mt19937_64's state as operator<< writes it
//             "scheduler.step"          with scheduler(): CosineWithWarmup::current_step()
//             "<name>.<key>"            each add(name, ...) component's string map
//             anything else             the caller's metadata, e.g. "flag.--lr", "data.vocab_hex"
// A file that cannot be read or written, or is not a training state, is a std::runtime_error
// naming the path; a malformed file is nn::load_safetensors's ValueError (naming the path); the
// model's and the optimizer's refusals of their tensors are their own ValueErrors, naming the
// tensor. Nothing is written by a save that throws, and nothing is changed by a load that throws.

// Writes `state` and the caller's `metadata` to `path` atomically (nn::save_safetensors).
// Throws, writing nothing: a parameter or optimizer buffer holding a NaN or an infinity ("<path>: not
// saved: 'model.fc1.weight' holds a NaN or an infinity"; a diverged run never replaces a good
// checkpoint); a metadata key the state's own names use ("model.", "optim.", "train.",
// "scheduler.", a component's "<name>."); two components of one name.
void save(const std::string& path, const TrainingState& state, const nn::Metadata& metadata);

// Restores `state` from `path`; returns the step saved. Everything is checked before anything
// changes; each refusal names the path and:
//   no "train.step"                         not a training checkpoint (a model's weights alone)
//   options.expect(), data(), vocabulary(), max_step()   as they say
//   "train.step", "scheduler.step"          not a decimal integer in [0, INT_MAX]
//   "train.rng"                             missing (with generator()), or not exactly the text
//                                           operator<< writes for the state it reads
//   "model.<name>"                          holds a NaN or an infinity
//   "optim.<param>.step"                    above "train.step" (a count of steps taken)
//   "<name>.*"                              none for a component whose state_dict() is not empty
//   nn::Module::load_state_dict's and the optimizer's own errors (a non-finite buffer, a negative
//   exp_avg_sq: optim/optimizer.hpp), and a component's, as a std::runtime_error
//   "<path>: component '<name>' (its '<name>.*' metadata): <its message>"
// If the optimizer's load throws, the model and the components are put back and the exception
// passes on. The scheduler is set to the saved step, the generator to the saved state.
int load(const std::string& path, TrainingState& state, const LoadOptions& options);

// A new run from saved weights (nanoGPT's init_from): loads only "model.*" into `model`; returns
// the step they were saved at. The checks of load that concern the model (not a training
// checkpoint, options.expect() and vocabulary(), "train.step", finite weights), then
// nn::Module::load_state_dict's; the model is untouched when one throws.
int load_model_weights(const std::string& path, nn::Module& model, const LoadOptions& options = LoadOptions());

// The name of the first tensor holding a NaN or an infinity, or "" if every value is finite.
std::string first_non_finite(const NamedTensors& tensors);

}  // namespace xgrad::train
