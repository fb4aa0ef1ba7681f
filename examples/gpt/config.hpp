// examples/gpt/config.hpp — the run's settings: one table of flags (name, default, range, help,
// and whether --resume must repeat it or --init-from must match it: common/flags.hpp), and the
// checks that need no data, so that a bad combination is refused before the text is read.
#pragma once

#include <cstdint>
#include <string>

#include "common/flags.hpp"
#include "model.hpp"

namespace gpt {

struct Config {
    GPTConfig model;              // L 4, H 4, d 128, block 64, pos learned, tied, biases, dropout 0
    bool no_tie = false, no_bias = false;  // the flags behind model.tie and model.bias
    int steps = 2000;             // optimizer steps (iterations) in the whole run
    int batch_size = 12;          // B, windows of block+1 tokens per step, over all ranks
    int grad_accum = 1;           // N, micro-steps per step, each of B/(W·N) windows per rank
    double lr = 1e-3;             // peak learning rate, reached after the warmup
    double min_lr = 1e-4;         // the cosine decay's floor, reached at the last step
    int warmup = 100;             // steps of linear warmup from 0 (capped at steps/10 unless given)
    double beta1 = 0.9, beta2 = 0.99;
    double weight_decay = 0.1;    // AdamW's decoupled λ, on the ≥2-D weights only
    double grad_clip = 1.0;       // max global gradient norm (0: no clipping)
    std::uint64_t seed = 1337;    // initialisation, batches, samples
    int threads = 1;              // xgrad threads (set_num_threads, core/threads.hpp)
    std::string data;             // empty: the KJV from `bible`
    std::string val_data;         // a text file to validate on (then --data trains whole); empty: 90/10
    std::string tokenizer = "char";  // char: one byte a token; bpe: byte pairs (tokens.hpp)
    std::int64_t vocab_size = 4096;  // --tokenizer bpe: V = 256 byte tokens + the merges
    std::string out = "out/gpt";
    std::string resume;           // checkpoint.safetensors to continue exactly
    std::string init_from;        // checkpoint.safetensors whose weights start a new run
    int stop_after = 0;
    bool eval_only = false;       // with --resume: print the fixed-set validation loss and exit
    int eval_every = 250;         // steps between validation losses
    int eval_batches = 50;        // batches in the fixed validation set
    int sample = 500;             // tokens to sample at the end (characters with --tokenizer char)
    double temperature = 0.8;
    int top_k = 0;
    double top_p = 1.0;           // the nucleus (1: off)
    std::string kv_cache = "on";  // sample through the KV cache (on) or recompute (off)
    std::string prompt = "And God said";
    bool prompt_given = false;    // --prompt was given (else a text without its characters gets another)
    std::string heatmap_text = "Ge1:1 In the beginning God created the heaven and the earth.";
    int heatmap_layer = -1;       // -1: the last block
    int heatmap_head = 0;
    bool verbose = false;         // the optimizer's full memory table instead of its summary
    int profile = 0;              // steps profiled after the warm-up (common/profile.hpp); 0: none
    int neighbours = 0;           // frequent tokens whose nearest tokens are printed at the end (0: none)
    int zero = 0;                 // 0: DistributedDataParallel; 1, 2: ZeRO's stage (distributed/zero.hpp)
    int lora_rank = 0;            // r of the LoRA adapters (lora.hpp); 0: no adapters, every weight trains
    double lora_alpha = 0;        // α; 0: r, so that s = α/r = 1
    std::string lora_targets = "attention";  // a comma list of attention, mlp, all, embedding
    bool merge_lora = false;      // model.safetensors with the adapters merged into W
};

// Every flag of the gpt program, bound to `cfg`'s fields, as rows of `table`.
void add_flags(examples::FlagTable& table, Config& cfg);

// After parsing: the defaults that depend on other flags (--arch llama: rope and no biases; the
// warmup capped at steps/10 unless given; tie and bias from --no-tie and --no-bias), then every
// check that needs no data. Throws std::invalid_argument naming the flags.
void finish_flags(const examples::FlagTable& table, Config& cfg);

}  // namespace gpt
