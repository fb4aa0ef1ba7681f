// examples/char_mlp/checkpoint.hpp — one safetensors file holding a whole training state.
//
//   tensors   "model.<param>"            the model's parameters (emb.weight, fc1.weight, ...)
//             "optim.<param>.<buffer>"   AdamW's exp_avg / exp_avg_sq
//   metadata  "optim.<key>"              the optimizer's step counts, lrs and options
//             "train.step"               the number of steps done
//             "train.rng"                the batch sampler's std::mt19937_64 state (text)
//             "config.block_size", "config.embed_dim", "config.hidden"
// Restoring all of it makes a resumed run take exactly the steps the uninterrupted run takes.
#pragma once

#include <random>
#include <string>

#include "model.hpp"
#include "optim/optim.hpp"

namespace char_mlp {

struct ModelShape {
    int block, embed_dim, hidden;
};

void save_checkpoint(const std::string& path, const CharMLP& model, const optim::Optimizer& opt, int step,
                     const std::mt19937_64& rng, const ModelShape& shape);

// Restores model, optimizer and rng; returns the step to continue from. Throws (leaving the
// model and optimizer untouched) if the file is unreadable or was made with another shape.
int load_checkpoint(const std::string& path, CharMLP& model, optim::Optimizer& opt, std::mt19937_64& rng,
                    const ModelShape& shape);

}  // namespace char_mlp
