// examples/char_mlp/checkpoint.cpp — save and restore model + optimizer + sampler state.
#include "checkpoint.hpp"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace char_mlp {

namespace {
const std::string kModel = "model.", kOptim = "optim.";

bool strip(const std::string& s, const std::string& prefix, std::string& rest) {
    if (s.compare(0, prefix.size(), prefix) != 0) return false;
    rest = s.substr(prefix.size());
    return true;
}
}  // namespace

void save_checkpoint(const std::string& path, const CharMLP& model, const optim::Optimizer& opt, int step,
                     const std::mt19937_64& rng, const ModelShape& shape) {
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
    meta["config.block_size"] = std::to_string(shape.block);
    meta["config.embed_dim"] = std::to_string(shape.embed_dim);
    meta["config.hidden"] = std::to_string(shape.hidden);
    nn::save_safetensors(path, tensors, meta);
}

int load_checkpoint(const std::string& path, CharMLP& model, optim::Optimizer& opt, std::mt19937_64& rng,
                    const ModelShape& shape) {
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    auto meta = [&](const std::string& key) {
        auto it = file.metadata.find(key);
        if (it == file.metadata.end())
            throw std::runtime_error(fmt::format("{}: not a char_mlp checkpoint (no '{}')", path, key));
        return it->second;
    };
    const ModelShape saved{std::stoi(meta("config.block_size")), std::stoi(meta("config.embed_dim")),
                           std::stoi(meta("config.hidden"))};
    if (saved.block != shape.block || saved.embed_dim != shape.embed_dim || saved.hidden != shape.hidden)
        throw std::runtime_error(fmt::format(
            "{}: saved with --block-size {} --embed-dim {} --hidden {}, but this run has {} {} {}", path,
            saved.block, saved.embed_dim, saved.hidden, shape.block, shape.embed_dim, shape.hidden));

    NamedTensors model_state;
    optim::OptimizerState optim_state;
    std::string rest;
    for (const auto& [name, t] : file.tensors) {
        if (strip(name, kModel, rest)) model_state.emplace_back(rest, t);
        else if (strip(name, kOptim, rest)) optim_state.tensors.emplace_back(rest, t);
    }
    for (const auto& [key, value] : file.metadata)
        if (strip(key, kOptim, rest)) optim_state.metadata[rest] = value;
    std::mt19937_64 restored;
    std::istringstream(meta("train.rng")) >> restored;
    const int step = std::stoi(meta("train.step"));

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
    return step;
}

}  // namespace char_mlp
