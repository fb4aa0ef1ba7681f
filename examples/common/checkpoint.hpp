// examples/common/checkpoint.hpp — the examples' checkpoint.safetensors: a train::TrainingState
// (train/state.hpp: the model, AdamW, the step, the batch sampler's generator), with every flag that
// shapes the trajectory as "flag.<name>" and the text's fingerprint (train/fingerprint.hpp).
// A resume takes exactly the steps of the uninterrupted run; other flags, another text or another
// tokenizer are refused. examples/gpt/README.md, "Checkpoints: resume, train further, sample",
// explains the file and its three uses.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

#include <xgrad/nn/module.hpp>
#include <xgrad/optim/optimizer.hpp>
#include <xgrad/train/fingerprint.hpp>
#include <xgrad/train/state.hpp>

namespace examples {

// Flag name → value as typed on the command line, e.g. {"--lr", "0.003"}; saved as "flag.--lr".
using RunFlags = std::map<std::string, std::string>;

// Writes `state` (train::save) with `flags` and, with `data`, its fingerprint; train::save's
// errors (a NaN or an infinity anywhere: nothing written).
void save_checkpoint(const std::string& path, const xgrad::train::TrainingState& state, const RunFlags& flags,
                     const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);
// The same for a state of the model, AdamW, the step and the batch sampler's generator.
void save_checkpoint(const std::string& path, const xgrad::nn::Module& model, const xgrad::optim::Optimizer& opt,
                     int step, const std::mt19937_64& rng, const RunFlags& flags,
                     const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);
// The same with the optimizer's whole state given (ZeRO: gathered onto rank 0 by the collective
// distributed::ZeroRedundancyOptimizer::state_dict); the same file as one process's.
void save_checkpoint(const std::string& path, const xgrad::nn::Module& model,
                     const xgrad::optim::OptimizerState& optimizer_state, int step, const std::mt19937_64& rng,
                     const RunFlags& flags, const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);

// --resume: restores `state` (train::load); returns the step to continue from. Refuses (changing
// nothing) what train::load refuses, a checkpoint saved with other `flags` (naming the flag and
// both values) or without one of them, a step beyond `flags`' --steps, and, with `data`, another
// vocabulary, text or tokenizer.
int load_checkpoint(const std::string& path, xgrad::train::TrainingState& state, const RunFlags& flags,
                    const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);
// The same for the model, AdamW and the batch sampler's generator.
int load_checkpoint(const std::string& path, xgrad::nn::Module& model, xgrad::optim::Optimizer& opt,
                    std::mt19937_64& rng, const RunFlags& flags,
                    const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);
// The same with the optimizer's load given as a function of the whole saved state, for ZeRO
// (collective: every rank reads the file and calls this).
int load_checkpoint(const std::string& path, xgrad::nn::Module& model,
                    const std::function<void(const xgrad::optim::OptimizerState&)>& load_optimizer,
                    std::mt19937_64& rng, const RunFlags& flags,
                    const std::optional<xgrad::train::TextFingerprint>& data = std::nullopt);

// --init-from: the checkpoint's model weights alone (train::load_model_weights); returns the step
// they were saved at. Refuses another value of one of `model_flags`, a vocabulary other than `vocab`
// (V bytes, id i = byte i) or a tokenizer other than `tokenizer`.
int load_model_weights(const std::string& path, xgrad::nn::Module& model, const RunFlags& model_flags,
                       const std::string& vocab, const std::string& tokenizer = "");

}  // namespace examples
