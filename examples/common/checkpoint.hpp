// examples/common/checkpoint.hpp — one safetensors file holding a whole training state: any
// nn::Module, its optimizer, the step count and the batch sampler's generator (char_mlp and gpt
// save, resume and start new runs with it).
//
//   tensors   "model.<param>", "optim.<param>.<buffer>"   the parameters; AdamW's exp_avg, exp_avg_sq
//   metadata  "optim.<key>", "train.step", "train.rng"    the optimizer's counts, the step, the sampler
//             "flag.--steps", ...                         every flag that shapes the trajectory
//             "data.vocab_hex", "data.text_bytes", "data.text_fnv1a64"   the vocabulary (byte i as 2
//                                                         hex digits) and the text's length and hash
//             "data.tokenizer"                            byte-pair runs: the tokenizer's identity
// A resume takes exactly the steps of the uninterrupted run; other flags, another text or another
// tokenizer are refused, since token id 5 must keep its character (nanoGPT's meta.pkl).
// examples/gpt/README.md, "Checkpoints: resume, train further, sample", explains the file and its
// three uses.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

#include <xgrad/nn/module.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/optim/optimizer.hpp>

namespace examples {

// Flag name → value as typed on the command line, e.g. {"--lr", "0.003"}.
using RunFlags = std::map<std::string, std::string>;

// The data a model was trained on, as far as its ids are concerned.
struct TextFingerprint {
    std::string vocab;            // (V,) bytes: id i is the byte vocab[i]; any of 0x00-0xff
    std::uint64_t text_bytes = 0; // the length of the training text
    std::uint64_t text_fnv1a = 0; // its 64-bit FNV-1a hash (io::fnv1a64)
    std::string tokenizer;        // "": one byte per token; else what gives ids above the bytes their
                                  // meaning, e.g. a byte-pair tokenizer's merges as a hash (gpt/tokens.hpp)
};
TextFingerprint fingerprint(const std::string& vocab, const std::string& text);

// The fingerprint as metadata ("data.vocab_hex", "data.text_bytes", "data.text_fnv1a64", and
// "data.tokenizer" when set), for the checkpoint and for a model file that needs its vocabulary to
// be sampled from.
xgrad::nn::Metadata fingerprint_metadata(const TextFingerprint& data);

// The name of the first tensor holding a NaN or an infinity, or "" if every value is finite.
std::string first_non_finite(const xgrad::NamedTensors& tensors);

// Writes the checkpoint atomically (nn::save_safetensors). With `data`, records its fingerprint.
// Throws std::runtime_error, writing nothing, if a parameter or an optimizer buffer holds a NaN
// or an infinity: a diverged run never replaces a good checkpoint.
void save_checkpoint(const std::string& path, const xgrad::nn::Module& model, const xgrad::optim::Optimizer& opt,
                     int step, const std::mt19937_64& rng, const RunFlags& flags,
                     const std::optional<TextFingerprint>& data = std::nullopt);
// The same with the optimizer's state already taken: a sharded optimizer's whole state, gathered
// onto rank 0 (distributed::ZeroRedundancyOptimizer::state_dict), makes the same file as one
// process's optimizer.state_dict(). The same errors.
void save_checkpoint(const std::string& path, const xgrad::nn::Module& model,
                     const xgrad::optim::OptimizerState& optimizer_state, int step, const std::mt19937_64& rng,
                     const RunFlags& flags, const std::optional<TextFingerprint>& data = std::nullopt);

// Restores model, optimizer and rng; returns the step to continue from. Throws
// std::runtime_error (leaving the model and optimizer untouched) if the file is unreadable,
// is not a training checkpoint, records no value of one of `flags` (written before that flag
// existed), was saved with other flags (naming the flag and both values), or, with `data`,
// lacks a fingerprint or was trained on another vocabulary, text or tokenizer (naming the first
// id whose byte differs, both lengths and hashes, or both tokenizers). A state no run saves is
// refused too, naming the invariant broken: a weight that is NaN or infinite, a step beyond `flags`' --steps, a
// parameter's AdamW step count above the step; the optimizer's ValueError for a non-finite
// buffer or a negative exp_avg_sq (optim/optimizer.hpp).
int load_checkpoint(const std::string& path, xgrad::nn::Module& model, xgrad::optim::Optimizer& opt,
                    std::mt19937_64& rng, const RunFlags& flags,
                    const std::optional<TextFingerprint>& data = std::nullopt);
// The same with the optimizer's load given as a function of the whole saved state, for a sharded
// optimizer (each rank keeps its own part: ZeroRedundancyOptimizer::load_state_dict, collective,
// so every rank reads the file and calls this). `load_optimizer` must change nothing when it
// throws; the model is then put back as it was, and the exception passes on.
int load_checkpoint(const std::string& path, xgrad::nn::Module& model,
                    const std::function<void(const xgrad::optim::OptimizerState&)>& load_optimizer,
                    std::mt19937_64& rng, const RunFlags& flags,
                    const std::optional<TextFingerprint>& data = std::nullopt);

// Loads only the model's weights ("model.*") of a checkpoint, for a new run that starts from them
// (gpt's --init-from); returns the step they were saved at. Throws std::runtime_error, leaving the
// model untouched, if the file is not a training checkpoint, records another value of one of
// `model_flags` (naming the flag and both values), a vocabulary other than `vocab` (V bytes,
// id i = byte i; naming the first id that differs), a tokenizer other than `tokenizer`
// (TextFingerprint::tokenizer; naming both) or a weight that is NaN or infinite;
// nn::Module::load_state_dict's errors else.
int load_model_weights(const std::string& path, xgrad::nn::Module& model, const RunFlags& model_flags,
                       const std::string& vocab, const std::string& tokenizer = "");

}  // namespace examples
