// examples/gpt/results.hpp — what a run prints: the model, the graph's memory, each step's losses,
// and at the end the losses against the bigram baseline, AdamW's memory, samples and pictures.
#pragma once

#include <optional>

#include <xgrad/data/sampler.hpp>
#include <xgrad/optim/optimizer.hpp>  // MemoryReport

#include "common/outputs.hpp"  // FinalSaves
#include "common/run_log.hpp"  // LossLog, Progress
#include "config.hpp"
#include "setup.hpp"           // TextData

namespace gpt {

// "model  GPT: L 4, H 4, d 128, block 64, pos learned, head tied to wte: ... parameters".
void print_model(const LanguageModel& model);

// Before the first step (rank 0): the graph's memory on one micro-batch of b fixed validation
// windows, and for byte pairs or a sparse token table the table's share of a step, counted on the
// next batches of a copy of `sampler` (the run's own draws stay as they are).
void print_start(const Config& cfg, LanguageModel& model, const TextData& d, int b, const data::WindowSampler& sampler);

// After step `step` (1-based): the validation loss every --eval-every steps and at the last
// (every rank evaluates: the same weights give the same value, so a divergence stops all), and
// every 10 steps a row of loss.csv (rank 0's) and the progress line; byte pairs add the
// validation loss per character to both.
void log_step(const Config& cfg, LanguageModel& model, const TextData& d, int step, double train_loss, double lr,
              std::optional<examples::LossLog>& log, examples::Progress& progress);

// --eval-only: the fixed-set validation loss (bench/gpt_to_torch.py compares this line with
// PyTorch's figure), per character too for byte pairs, the heatmap and --neighbours.
int evaluate_only(const Config& cfg, LanguageModel& model, const TextData& d);

// Rank 0, after the last step: the losses, the optimizer's memory, the samples, the pictures.
void print_results(const Config& cfg, LanguageModel& model, const TextData& d, const optim::MemoryReport& memory,
                   double t0, int start, examples::FinalSaves& saves);

}  // namespace gpt
