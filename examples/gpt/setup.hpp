// examples/gpt/setup.hpp — what run() does before and after its loop (main.cpp): the output
// directory checked, the text made into ids, a checkpoint restored, the files saved.
#pragma once

#include <functional>

#include <xgrad/data/sampler.hpp>
#include <xgrad/optim/lr_scheduler.hpp>
#include <xgrad/train/fingerprint.hpp>
#include <xgrad/train/state.hpp>

#include "common/data_parallel.hpp"  // BatchSplit
#include "common/outputs.hpp"        // FinalSaves
#include "config.hpp"
#include "data.hpp"
#include "model.hpp"
#include "tokens.hpp"

namespace gpt {

// The text as ids: its tokens, the 90/10 split, and the fingerprint stored in every file written.
struct TextData {
    Tokens tokens;                        // characters or byte pairs
    Split split;                          // ids: train (the first 90%), val (the rest)
    train::TextFingerprint fingerprint;
};

// The threads, the output directory (rank 0 will write every file of the run there: each is
// checked now, so that a path in the way stops the run before its first step) and, on several
// ranks or micro-steps, how a batch is split over them (common/data_parallel.hpp).
examples::BatchSplit prepare_run(const Config& cfg);

// The text (the KJV or --data) as ids: characters, or byte pairs learnt on the training part (or
// read from beside --resume's or --init-from's checkpoint). Throws std::invalid_argument for a
// --prompt the text cannot encode.
TextData load_data(const Config& cfg);

// The batch sampler of this rank: B windows a step drawn from --seed, this rank's rows of each
// micro-step (data/sampler.hpp).
data::WindowSamplerOptions sampler_options(const Config& cfg, const examples::BatchSplit& split);

// The weights a run starts from, before the optimizer is built. --init-from (nanoGPT's
// init_from): the saved model's weights; AdamW, the schedule and the batches start afresh at step 0
// (training a finished model further, or fine-tuning it). The file is a run's
// checkpoint.safetensors (its model flags and vocabulary checked) or a model.safetensors (nanoGPT's
// names, e.g. a LoRA run's merged model: its vocabulary checked, and every name and shape by
// load_state_dict). --lora-rank: then the adapters (lora.hpp), beside the loaded base; a LoRA run's
// checkpoint given to --init-from holds its adapters, which are added first and loaded with the
// base (with the same --lora-* flags: e.g. --eval-only of it on another text). Throws
// std::invalid_argument for a LoRA run's checkpoint without --lora-rank.
void load_weights(const Config& cfg, const examples::FlagTable& flags, LanguageModel& model, const TextData& d);

// --resume: the model, AdamW's moments, the step and the batch sampler as saved, the schedule at
// that step (the run continues exactly); returns the step (0 without --resume). A LoRA run's model
// holds its adapters already (lora.hpp), so that the saved base and adapters load by name.
// `load_optimizer` takes the saved AdamW state: optimizer.load_state_dict, or under ZeRO each
// rank's share of it (collective).
int restore(const Config& cfg, const examples::FlagTable& flags, LanguageModel& model,
            const std::function<void(const optim::OptimizerState&)>& load_optimizer,
            optim::CosineWithWarmup& schedule, data::WindowSampler& sampler, const TextData& d);

// checkpoint.safetensors (for --resume and --init-from: the model, AdamW, the step, the sampler,
// the flags and the text's fingerprint) and model.safetensors (nanoGPT's names, with the
// vocabulary sampling needs), and for byte pairs tokenizer.bpe beside them; each tried even if
// another fails (a full disk). A LoRA run: its checkpoint holds the frozen base, the adapters and
// their AdamW state; the adapter folder --out/adapter; model.safetensors only with --merge-lora,
// the adapters merged. `state`: the model and AdamW, live (its buffers written where they are,
// no copy) or under ZeRO its gathered state; save adds the sampler and the step.
void save(const Config& cfg, const examples::FlagTable& flags, const LanguageModel& model,
          train::TrainingState state, int step, const data::WindowSampler& sampler, const TextData& d,
          examples::FinalSaves& saves);

}  // namespace gpt
