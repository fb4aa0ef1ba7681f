// examples/common/checkpoint.hpp — one safetensors file holding a whole training state: any
// nn::Module, its optimizer, the step count and the batch sampler's generator (char_mlp and gpt
// save and resume with it).
//
//   tensors   "model.<param>"            the model's parameters (emb.weight, fc1.weight, ...)
//             "optim.<param>.<buffer>"   AdamW's exp_avg / exp_avg_sq
//   metadata  "optim.<key>"              the optimizer's step counts, lrs and options
//             "train.step"               the number of steps done
//             "train.rng"                the batch sampler's std::mt19937_64 state (text)
//             "flag.--steps", "flag.--lr", ...  every flag that shapes the trajectory
// Restoring all of it makes a resumed run take exactly the steps the uninterrupted run takes;
// the flags are compared on load, so a resume with other flags is refused, not half-honoured.
#pragma once

#include <map>
#include <random>
#include <string>

#include <xgrad/nn/module.hpp>
#include <xgrad/optim/optimizer.hpp>

namespace examples {

// Flag name → value as typed on the command line, e.g. {"--lr", "0.003"}.
using RunFlags = std::map<std::string, std::string>;

void save_checkpoint(const std::string& path, const xgrad::nn::Module& model, const xgrad::optim::Optimizer& opt,
                     int step, const std::mt19937_64& rng, const RunFlags& flags);

// Restores model, optimizer and rng; returns the step to continue from. Throws
// std::runtime_error (leaving the model and optimizer untouched) if the file is unreadable,
// is not a training checkpoint, or was saved with other flags (naming the flag and both values).
int load_checkpoint(const std::string& path, xgrad::nn::Module& model, xgrad::optim::Optimizer& opt,
                    std::mt19937_64& rng, const RunFlags& flags);

}  // namespace examples
