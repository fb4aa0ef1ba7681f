// examples/common/checkpoint.cpp — save and restore model + optimizer + sampler state
// (the file's layout is listed in checkpoint.hpp).
#include "common/checkpoint.hpp"

#include <climits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>
#include <xgrad/nn/serialize.hpp>

namespace examples {

using namespace xgrad;

namespace {
const std::string kModel = "model.", kOptim = "optim.", kFlag = "flag.";

bool strip(const std::string& s, const std::string& prefix, std::string& rest) {
    if (s.compare(0, prefix.size(), prefix) != 0) return false;
    rest = s.substr(prefix.size());
    return true;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, int step,
                     const std::mt19937_64& rng, const RunFlags& flags) {
    NamedTensors tensors;
    nn::Metadata meta;
    for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(kModel + name, t);
    const optim::OptimizerState os = opt.state_dict();
    for (const auto& [name, t] : os.tensors) tensors.emplace_back(kOptim + name, t);
    for (const auto& [key, value] : os.metadata) meta[kOptim + key] = value;
    std::ostringstream rng_text;
    rng_text << rng;
    meta["train.step"] = std::to_string(step);
    meta["train.rng"] = rng_text.str();
    for (const auto& [flag, value] : flags) meta[kFlag + flag] = value;
    nn::save_safetensors(path, tensors, meta);
}

int load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, std::mt19937_64& rng,
                    const RunFlags& flags) {
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    auto meta = [&](const std::string& key) {
        auto it = file.metadata.find(key);
        if (it == file.metadata.end())
            throw std::runtime_error(fmt::format("{}: not a training checkpoint (no '{}')", path, key));
        return it->second;
    };
    for (const auto& [flag, value] : flags) {
        const std::string saved = meta(kFlag + flag);
        if (saved != value)
            throw std::runtime_error(fmt::format("{}: saved with {} {}, but this run has {} {}; resume with the "
                                                 "same flags",
                                                 path, flag, saved, flag, value));
    }
    NamedTensors model_state;
    optim::OptimizerState optim_state;
    std::string rest;
    for (const auto& [name, t] : file.tensors) {
        if (strip(name, kModel, rest)) model_state.emplace_back(rest, t);
        else if (strip(name, kOptim, rest)) optim_state.tensors.emplace_back(rest, t);
    }
    for (const auto& [key, value] : file.metadata)
        if (strip(key, kOptim, rest)) optim_state.metadata[rest] = value;
    // The rng state is 312 numbers; operator>> would skip spaces, take a '+' and ignore what
    // follows, so the text must be exactly what operator<< writes for the state it reads.
    const std::string rng_saved = meta("train.rng");
    std::mt19937_64 restored;
    std::istringstream rng_text(rng_saved);
    std::ostringstream rng_again;
    if (rng_text >> restored) rng_again << restored;
    if (!rng_text || rng_again.str() != rng_saved)
        throw std::runtime_error(fmt::format("{}: 'train.rng' = {} is not a std::mt19937_64 state as "
                                             "operator<< writes it", path, quoted_text(rng_saved)));
    // Strictly one decimal integer in [0, INT_MAX] (core/parse.hpp): std::stoi read "5abc" as 5
    // and "1e3" as 1.
    const std::string step_saved = meta("train.step");
    const std::optional<std::int64_t> step = try_parse_int64(step_saved);
    if (!step || *step < 0 || *step > INT_MAX)
        throw std::runtime_error(fmt::format("{}: 'train.step' = {} is not a step count (a decimal integer "
                                             "in [0, {}])", path, quoted_text(step_saved), INT_MAX));

    // Both loads validate before they change anything; if the optimizer's fails, put the
    // model back so that a failed resume leaves no trace.
    NamedTensors before;
    for (const auto& [name, t] : model.state_dict()) before.emplace_back(name, t.detach());
    model.load_state_dict(model_state);
    try {
        opt.load_state_dict(optim_state);
    } catch (...) {
        model.load_state_dict(before);
        throw;
    }
    rng = restored;
    return static_cast<int>(*step);
}

}  // namespace examples
