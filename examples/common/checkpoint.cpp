// examples/common/checkpoint.cpp — save and restore model + optimizer + sampler state
// (the file's layout is listed in checkpoint.hpp).
#include "common/checkpoint.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>
#include <xgrad/io/checksum.hpp>
#include <xgrad/nn/serialize.hpp>

namespace examples {

using namespace xgrad;

namespace {
const std::string kModel = "model.", kOptim = "optim.", kFlag = "flag.";
const std::string kVocab = "data.vocab_hex", kTextBytes = "data.text_bytes", kTextHash = "data.text_fnv1a64";
const std::string kTokenizer = "data.tokenizer";

bool strip(const std::string& s, const std::string& prefix, std::string& rest) {
    if (s.compare(0, prefix.size(), prefix) != 0) return false;
    rest = s.substr(prefix.size());
    return true;
}

// The bytes of "0041ff" (two lowercase hex digits per byte), or nullopt for any other text.
std::optional<std::string> from_hex(const std::string& hex) {
    auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    if (hex.size() % 2 != 0) return std::nullopt;
    std::string bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        bytes.push_back(static_cast<char>(hi * 16 + lo));
    }
    return bytes;
}

// The value of a data.* key of the checkpoint; throws if it is missing.
std::string checkpoint_data_key(const std::string& path, const nn::Metadata& meta, const std::string& key) {
    auto it = meta.find(key);
    if (it == meta.end())
        throw std::runtime_error(fmt::format("{}: the checkpoint records no vocabulary ('{}' missing), so its token "
                                             "ids cannot be checked against this run's text; train afresh",
                                             path, key));
    return it->second;
}

// Refuses a checkpoint whose vocabulary differs from `now` (V bytes, id i = byte i); `advice`
// ends the message.
void check_same_vocab(const std::string& path, const nn::Metadata& meta, const std::string& now,
                      const std::string& advice) {
    auto get = [&](const std::string& key) { return checkpoint_data_key(path, meta, key); };
    const std::optional<std::string> vocab = from_hex(get(kVocab));
    if (!vocab)
        throw std::runtime_error(fmt::format("{}: '{}' = {} is not a vocabulary (two lowercase hex digits per byte)",
                                             path, kVocab, quoted_text(get(kVocab))));
    if (*vocab != now) {
        const auto at = std::mismatch(vocab->begin(), vocab->end(), now.begin(), now.end());
        const std::size_t id = std::size_t(at.first - vocab->begin());
        auto byte = [&](const std::string& v) { return id < v.size() ? quoted_text(v.substr(id, 1)) : std::string("nothing"); };
        throw std::runtime_error(fmt::format(
            "{}: vocabulary mismatch: the checkpoint was trained on a vocabulary of {} bytes, this run's text has one of {}; "
            "token id {} meant {} and would now mean {}. Every id must mean the character the weights learnt: {}",
            path, vocab->size(), now.size(), id, byte(*vocab), byte(now), advice));
    }
}

// Refuses a checkpoint whose tokenizer differs from `now` ("" for one byte per token, as a
// checkpoint without the key); `advice` ends the message.
void check_same_tokenizer(const std::string& path, const nn::Metadata& meta, const std::string& now,
                          const std::string& advice) {
    const auto it = meta.find(kTokenizer);
    const std::string saved = it == meta.end() ? "" : it->second;
    auto name = [](const std::string& t) { return t.empty() ? std::string("one byte per token") : "'" + t + "'"; };
    if (saved != now)
        throw std::runtime_error(fmt::format("{}: tokenizer mismatch: the checkpoint's ids are those of {}, this run's "
                                             "of {}; the ids above the bytes would mean other text: {}",
                                             path, name(saved), name(now), advice));
}

// Refuses a checkpoint whose vocabulary or text differs from this run's (see checkpoint.hpp).
void check_same_data(const std::string& path, const nn::Metadata& meta, const TextFingerprint& now) {
    check_same_vocab(path, meta, now.vocab, "resume on the text the checkpoint was trained on");
    auto get = [&](const std::string& key) { return checkpoint_data_key(path, meta, key); };
    const std::string bytes = get(kTextBytes), hash = get(kTextHash);
    const std::string bytes_now = std::to_string(now.text_bytes), hash_now = fmt::format("{:016x}", now.text_fnv1a);
    if (bytes != bytes_now || hash != hash_now)
        throw std::runtime_error(fmt::format(
            "{}: text mismatch: the checkpoint was trained on a text of {} bytes with FNV-1a hash {}, this run's text has "
            "{} bytes with hash {} (the same vocabulary). The resumed run would not continue the saved one: resume on "
            "the text the checkpoint was trained on",
            path, bytes, hash, bytes_now, hash_now));
    check_same_tokenizer(path, meta, now.tokenizer, "resume with the tokenizer saved beside the checkpoint");
}

// What a run's own checkpoint always satisfies, so that an edited file whose CRC was recomputed
// is refused when it breaks one: finite weights; train.step within this run's --steps (when
// `flags` has it); every parameter's AdamW step count t <= train.step (t counts the steps that
// gave it a gradient). The optimizer checks its buffers itself (finite, second moments >= 0).
void check_training_state(const std::string& path, const NamedTensors& model_state, const nn::Metadata& optim_meta,
                          int step, const RunFlags& flags) {
    const std::string bad = first_non_finite(model_state);
    if (!bad.empty())
        throw std::runtime_error(fmt::format("{}: 'model.{}' holds a NaN or an infinity, which a run never saves: "
                                             "the file was altered", path, bad));
    const auto steps = flags.count("--steps") ? try_parse_int64(flags.at("--steps")) : std::nullopt;
    if (steps && step > *steps)
        throw std::runtime_error(fmt::format("{}: 'train.step' = {} is beyond this run's --steps {}", path, step, *steps));
    const std::string suffix = ".step";
    for (const auto& [key, value] : optim_meta) {
        if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        const std::optional<std::int64_t> t = try_parse_int64(value);  // not a number: the optimizer refuses it
        if (t && *t > step)
            throw std::runtime_error(fmt::format("{}: 'optim.{}' = {} is more than the run's {} steps ('train.step')",
                                                 path, key, *t, step));
    }
}

// Strictly one decimal integer in [0, INT_MAX] (core/parse.hpp): std::stoi read "5abc" as 5
// and "1e3" as 1.
int checkpoint_step(const std::string& path, const std::string& saved) {
    const std::optional<std::int64_t> step = try_parse_int64(saved);
    if (!step || *step < 0 || *step > INT_MAX)
        throw std::runtime_error(fmt::format("{}: 'train.step' = {} is not a step count (a decimal integer "
                                             "in [0, {}])", path, quoted_text(saved), INT_MAX));
    return static_cast<int>(*step);
}
}  // namespace

std::string first_non_finite(const NamedTensors& tensors) {
    for (const auto& [name, t] : tensors) {
        const real* p = t.data().data();
        if (!std::all_of(p, p + t.numel(), [](real v) { return std::isfinite(v); })) return name;
    }
    return "";
}

TextFingerprint fingerprint(const std::string& vocab, const std::string& text) {
    return {vocab, text.size(), io::fnv1a64(text), ""};
}

nn::Metadata fingerprint_metadata(const TextFingerprint& data) {
    std::string hex;
    for (unsigned char b : data.vocab) hex += fmt::format("{:02x}", b);
    nn::Metadata meta{{kVocab, hex}, {kTextBytes, std::to_string(data.text_bytes)},
                      {kTextHash, fmt::format("{:016x}", data.text_fnv1a)}};
    if (!data.tokenizer.empty()) meta[kTokenizer] = data.tokenizer;
    return meta;
}

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& opt, int step,
                     const std::mt19937_64& rng, const RunFlags& flags, const std::optional<TextFingerprint>& data) {
    save_checkpoint(path, model, opt.state_dict(), step, rng, flags, data);
}

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::OptimizerState& os, int step,
                     const std::mt19937_64& rng, const RunFlags& flags, const std::optional<TextFingerprint>& data) {
    NamedTensors tensors;
    nn::Metadata meta = data ? fingerprint_metadata(*data) : nn::Metadata{};
    for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(kModel + name, t);
    for (const auto& [name, t] : os.tensors) tensors.emplace_back(kOptim + name, t);
    const std::string bad = first_non_finite(tensors);
    if (!bad.empty())
        throw std::runtime_error(fmt::format("{}: not saved: '{}' holds a NaN or an infinity (the run diverged); "
                                             "the file is left as it was",
                                             path, bad));
    for (const auto& [key, value] : os.metadata) meta[kOptim + key] = value;
    std::ostringstream rng_text;
    rng_text << rng;
    meta["train.step"] = std::to_string(step);
    meta["train.rng"] = rng_text.str();
    for (const auto& [flag, value] : flags) meta[kFlag + flag] = value;
    nn::save_safetensors(path, tensors, meta);
}

// The metadata value `key` of a training checkpoint; throws std::runtime_error naming the file and
// the flag that reads it (--resume, --init-from) when the key is missing: not a training checkpoint.
static std::string training_metadata(const nn::SafetensorsFile& file, const std::string& path, const std::string& key,
                                     const char* flag) {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
        throw std::runtime_error(fmt::format("{}: not a training checkpoint (no '{}'); {} takes the "
                                             "checkpoint.safetensors a run writes, not model.safetensors",
                                             path, key, flag));
    return it->second;
}

int load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, std::mt19937_64& rng,
                    const RunFlags& flags, const std::optional<TextFingerprint>& data) {
    return load_checkpoint(
        path, model, [&](const optim::OptimizerState& state) { opt.load_state_dict(state); }, rng, flags, data);
}

int load_checkpoint(const std::string& path, nn::Module& model,
                    const std::function<void(const optim::OptimizerState&)>& load_optimizer, std::mt19937_64& rng,
                    const RunFlags& flags, const std::optional<TextFingerprint>& data) {
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    auto meta = [&](const std::string& key) { return training_metadata(file, path, key, "--resume"); };
    for (const auto& [flag, value] : flags) {
        if (!file.metadata.count(kFlag + flag) && file.metadata.count("train.step"))
            throw std::runtime_error(fmt::format("{}: records no {} (a checkpoint written before the flag existed); "
                                                 "train anew to use it",
                                                 path, flag));
        const std::string saved = meta(kFlag + flag);
        if (saved != value)
            throw std::runtime_error(fmt::format("{}: saved with {} {}, but this run has {} {}; resume with the "
                                                 "same flags (pass {} {})",
                                                 path, flag, saved, flag, value, flag, saved));
    }
    if (data) check_same_data(path, file.metadata, *data);
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
    const int step = checkpoint_step(path, meta("train.step"));
    check_training_state(path, model_state, optim_state.metadata, step, flags);

    // Both loads validate before they change anything; if the optimizer's fails, put the
    // model back so that a failed resume leaves no trace.
    NamedTensors before;
    for (const auto& [name, t] : model.state_dict()) before.emplace_back(name, t.detach());
    model.load_state_dict(model_state);
    try {
        load_optimizer(optim_state);
    } catch (...) {
        model.load_state_dict(before);
        throw;
    }
    rng = restored;
    return step;
}

int load_model_weights(const std::string& path, nn::Module& model, const RunFlags& model_flags,
                       const std::string& vocab, const std::string& tokenizer) {
    const nn::SafetensorsFile file = nn::load_safetensors(path);
    auto meta = [&](const std::string& key) { return training_metadata(file, path, key, "--init-from"); };
    const int step = checkpoint_step(path, meta("train.step"));
    for (const auto& [flag, value] : model_flags) {
        if (!file.metadata.count(kFlag + flag))
            throw std::runtime_error(fmt::format("{}: records no {} (a checkpoint written before the flag existed), "
                                                 "so its model's shape cannot be checked; train anew",
                                                 path, flag));
        const std::string saved = meta(kFlag + flag);
        if (saved != value)
            throw std::runtime_error(fmt::format("{}: a model saved with {} {}, but this run has {} {}; the weights "
                                                 "fit only a model of the same shape: pass {} {}",
                                                 path, flag, saved, flag, value, flag, saved));
    }
    check_same_vocab(path, file.metadata, vocab, "train on a text with the same characters");
    check_same_tokenizer(path, file.metadata, tokenizer, "start from the tokenizer saved beside the checkpoint");
    NamedTensors model_state;
    std::string rest;
    for (const auto& [name, t] : file.tensors)
        if (strip(name, kModel, rest)) model_state.emplace_back(rest, t);
    check_training_state(path, model_state, {}, step, {});
    model.load_state_dict(model_state);
    return step;
}

}  // namespace examples
