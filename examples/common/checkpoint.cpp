// examples/common/checkpoint.cpp — the examples' flags and advice around train::save and train::load.
#include "common/checkpoint.hpp"

#include <xgrad/core/parse.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/train/state.hpp>

namespace examples {

using namespace xgrad;

const std::string kFlag = "flag.";

namespace {

// A switch (--no-tie) is given or left out, so "pass --no-tie true" names no command line: the
// flags split into those with a value and the switches ("true", "false"), each with its advice.
constexpr const char* kSwitchAdvice = "{name} is a switch: give it if saved true, leave it out if false";
std::pair<RunFlags, RunFlags> split_switches(const RunFlags& flags) {
    RunFlags valued, switches;
    for (const auto& [name, value] : flags) (value == "true" || value == "false" ? switches : valued)[name] = value;
    return {valued, switches};
}

}  // namespace

void save_checkpoint(const std::string& path, const train::TrainingState& state, const RunFlags& flags,
                     const std::optional<train::TextFingerprint>& data) {
    nn::Metadata meta = data ? train::fingerprint_metadata(*data) : nn::Metadata{};
    for (const auto& [flag, value] : flags) meta[kFlag + flag] = value;
    train::save(path, state, meta);
}

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, int step,
                     const std::mt19937_64& rng, const RunFlags& flags,
                     const std::optional<train::TextFingerprint>& data) {
    // Written from AdamW's live buffers: no copy of its state.
    save_checkpoint(path, train::TrainingState(model, opt).generator(rng).step(step), flags, data);
}

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::OptimizerState& optimizer_state,
                     int step, const std::mt19937_64& rng, const RunFlags& flags,
                     const std::optional<train::TextFingerprint>& data) {
    save_checkpoint(path, train::TrainingState(model, optimizer_state).generator(rng).step(step), flags, data);
}

int load_checkpoint(const std::string& path, train::TrainingState& state, const RunFlags& flags,
                    const std::optional<train::TextFingerprint>& data) {
    train::LoadOptions options;
    const auto [valued, switches] = split_switches(flags);
    options.expect(kFlag, valued, "resume with the same flags (pass {name} {saved})");
    options.expect(kFlag, switches, std::string("resume with the same flags (") + kSwitchAdvice + ")");
    if (data) options.data(*data);
    if (flags.count("--steps"))
        if (const auto steps = try_parse_int64(flags.at("--steps"))) options.max_step(*steps);
    return train::load(path, state, options);
}

int load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, std::mt19937_64& rng,
                    const RunFlags& flags, const std::optional<train::TextFingerprint>& data) {
    return load_checkpoint(
        path, model, [&](const optim::OptimizerState& state) { opt.load_state_dict(state); }, rng, flags, data);
}

int load_checkpoint(const std::string& path, nn::Module& model,
                    const std::function<void(const optim::OptimizerState&)>& load_optimizer, std::mt19937_64& rng,
                    const RunFlags& flags, const std::optional<train::TextFingerprint>& data) {
    train::TrainingState state(model, load_optimizer);
    return load_checkpoint(path, state.generator(rng), flags, data);
}

int load_model_weights(const std::string& path, nn::Module& model, const RunFlags& model_flags,
                       const std::string& vocab, const std::string& tokenizer) {
    train::TextFingerprint data;
    data.vocab = vocab;
    data.tokenizer = tokenizer;
    const auto [valued, switches] = split_switches(model_flags);
    const train::LoadOptions options =
        train::LoadOptions()
            .expect(kFlag, valued, "the weights fit only a model of the same shape: pass {name} {saved}")
            .expect(kFlag, switches, std::string("the weights fit only a model of the same shape: ") + kSwitchAdvice)
            .vocabulary(data);
    return train::load_model_weights(path, model, options);
}

}  // namespace examples
