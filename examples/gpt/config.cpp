// examples/gpt/config.cpp — the flag table of the gpt program and the checks before any data.
#include "config.hpp"

#include <algorithm>
#include <climits>
#include <limits>

#include <fmt/format.h>

#include "common/cli.hpp"            // require, check_memory
#include "common/data_parallel.hpp"  // split_batch
#include "common/profile.hpp"        // check_profile_window
#include "lora.hpp"                  // lora_targets

namespace gpt {

using examples::kModel;
using examples::kRanks;
using examples::kResume;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// The model's shape: --init-from must match these (kModel), --resume repeat them.
void add_model_flags(examples::FlagTable& t, Config& c) {
    GPTConfig& m = c.model;
    t.integer("--n-layer", m.n_layer, 1, 256, "L, transformer blocks", kModel);
    t.integer("--n-head", m.n_head, 1, 256, "H, attention heads per block (must divide --d)", kModel);
    t.integer("--d", m.d, 1, 65536, "d, the model width (n_embd)", kModel);
    t.integer("--block-size", m.block, 1, 65536, "T, tokens of context (characters with --tokenizer char)", kModel);
    t.choice("--arch", m.arch, {"gpt2", "llama"}, "the block: gpt2 (LayerNorm, GELU MLP, biases; nanoGPT's names) or llama (RMSNorm, SwiGLU, rope, no biases; Meta's names)", kModel);
    t.integer("--n-kv-head", m.n_kv_head, 0, 256, "K/V heads, dividing --n-head (grouped-query attention; 1: multi-query; 0: --n-head)", kModel);
    t.integer("--ffn-hidden", m.ffn_hidden, 0, INT_MAX, "--arch llama: SwiGLU's hidden width (0: 8d/3 rounded up to a multiple of 64)", kModel);
    t.choice("--pos", m.pos, {"learned", "sinusoidal", "rope", "none"}, "positions: learned (table wpe), sinusoidal (fixed), rope (rotary, in attention), none; --arch llama: rope", kModel);
    t.flag("--no-tie", c.no_tie, "give the head its own (V, d) weight instead of the token table (default: tied)", kModel);
    t.flag("--no-bias", c.no_bias, "no biases in the Linear and LayerNorm layers (default: biases on; --arch llama has none)", kModel);
    t.choice("--tokenizer", c.tokenizer, {"char", "bpe"}, "tokens: char (one byte each; V = the bytes that occur) or bpe (byte pairs learnt on the training text, text/tokenizer.hpp, saved as tokenizer.bpe beside the checkpoint)", kModel);
    t.integer("--vocab-size", c.vocab_size, 256, INT_MAX, "--tokenizer bpe: V, the 256 byte tokens and V - 256 merges (at most what the training text's merges and the memory allow)", kModel);
    t.only_when("--vocab-size", [&c] { return c.tokenizer == "bpe"; });
}

// The trajectory: --resume must repeat these (kResume); the ranks of a run must agree on kRanks.
void add_training_flags(examples::FlagTable& t, Config& c) {
    t.real("--dropout", c.model.dropout, {0, 1, false, true}, "dropout probability after the embeddings, in attention and after each residual branch", kResume);
    t.flag("--checkpoint-blocks", c.model.checkpoint_blocks, "run each block through xgrad::checkpoint: the graph keeps the blocks' inputs, backward runs each block again (the same losses; less memory, more time)");
    t.flag("--sparse-embedding", c.model.sparse_embedding, "with --no-tie: the token table's gradient holds only the rows a batch looks up, and AdamW updates only those (lazily, as PyTorch's SparseAdam)", kResume);
    t.integer("--steps", c.steps, 1, INT_MAX, "optimizer steps (iterations) in the whole run", kResume);
    t.integer("--batch-size", c.batch_size, 1, INT_MAX, "B, windows of block-size + 1 tokens per step, over all ranks (under mpirun -np W, a multiple of W × --grad-accum)", kResume);
    t.integer("--grad-accum", c.grad_accum, 1, INT_MAX, "N, micro-steps per step: each rank takes B/(W·N) windows N times and adds up the gradients (the same step, less memory)", kRanks);
    t.integer("--zero", c.zero, 0, 2, "under mpirun: 0 every rank keeps all of AdamW's state (DistributedDataParallel); 1 each rank keeps the state of its own parameters only (ZeRO stage 1); 2 and only their reduced gradients (stage 2); the same steps and checkpoint", kRanks);
    t.real("--lr", c.lr, {0, inf, true}, "peak learning rate of AdamW, reached after the warmup", kResume);
    t.real("--min-lr", c.min_lr, {0, inf}, "learning rate at the end of the cosine decay (at most --lr)", kResume);
    t.integer("--warmup", c.warmup, 0, INT_MAX, "steps of linear warmup from 0 to --lr (default: 100, or steps/10 if that is smaller); at most --steps", kResume);
    t.real("--beta1", c.beta1, {0, 1, false, true}, "AdamW β1", kResume);
    t.real("--beta2", c.beta2, {0, 1, false, true}, "AdamW β2", kResume);
    t.real("--weight-decay", c.weight_decay, {0, inf}, "AdamW decoupled weight decay λ on the ≥2-D weights (biases and LayerNorm: none)", kResume);
    t.real("--grad-clip", c.grad_clip, {0, inf}, "clip the global gradient L2 norm to this before each step (0: off)", kResume);
    t.seed("--seed", c.seed, "seed of the initialisation, the batches and the samples", kResume);
    t.integer("--threads", c.threads, 1, 256, "threads: xgrad's pool, matrix products included (OpenBLAS itself runs on 1); at most the cores");
    t.text("--data", c.data, "a text file to train on instead of the KJV (--tokenizer char: each byte is a token)", kResume);
    t.text("--val-data", c.val_data, "with --data: a text file to validate on; --data then trains whole, instead of its first 90% (a split the caller chose, e.g. by verse)", kResume);
    t.only_when("--val-data", [&c] { return !c.val_data.empty(); });
    t.integer("--stop-after", c.stop_after, 0, INT_MAX, "stop after this many steps of this run and save a checkpoint (0: run to the end)", kRanks);
    t.flag("--eval-only", c.eval_only, "with --resume or --init-from: print the validation loss on the fixed set and exit (bench/gpt_to_torch.py)", kRanks);
    t.integer("--eval-every", c.eval_every, 1, INT_MAX, "steps between validation losses");
    t.integer("--eval-batches", c.eval_batches, 1, INT_MAX, "batches of --batch-size windows in the fixed validation set (evenly spaced over the split)", kResume);
}

// Fine-tuning with LoRA (lora.hpp): the adapters shape the trajectory (kResume), recorded only
// when --lora-rank is given, so that a plain run's checkpoint stays as it was.
void add_lora_flags(examples::FlagTable& t, Config& c) {
    t.integer("--lora-rank", c.lora_rank, 0, 65536, "r of the LoRA adapters W + (α/r)·B·A, A (r, in), B (out, r), on the --lora-targets layers of an --init-from base (or --resume a LoRA run); every other weight frozen, AdamW over the adapters alone (0: off, every weight trains)", kResume);
    t.real("--lora-alpha", c.lora_alpha, {0, inf}, "α of the adapters, scaling s = α/r (0: r, so s = 1)", kResume);
    t.text("--lora-targets", c.lora_targets, "the layers adapted, a comma list of: attention (attn.c_attn, attn.c_proj), q, k, v (parts of attn.c_attn, e.g. q,v), mlp (mlp.c_fc, mlp.c_proj), all (attention and mlp, and lm_head if --no-tie), embedding (transformer.wte)", kResume);
    t.flag("--merge-lora", c.merge_lora, "with --lora-rank: write model.safetensors with the adapters merged, W + (α/r)·B·A under the base's names (a plain model; --init-from reads it)");
    for (const char* name : {"--lora-rank", "--lora-alpha", "--lora-targets"})
        t.only_when(name, [&c] { return c.lora_rank > 0; });
}

// What the run prints, samples and writes: free to change between runs.
void add_output_flags(examples::FlagTable& t, Config& c) {
    t.path("--out", c.out, "directory (created if missing) for loss.csv/png, attention.csv/png, checkpoint.safetensors, model.safetensors (and --profile's trace.json, profile.png)");
    t.integer("--sample", c.sample, 0, INT_MAX, "tokens to sample after training (characters with --tokenizer char; 0: none)");
    t.real("--temperature", c.temperature, {0, inf, true}, "sampling temperature: logits are divided by it");
    t.integer("--top-k", c.top_k, 0, INT_MAX, "sample only among the k likeliest tokens (0: all)");
    t.real("--top-p", c.top_p, {0, 1, true}, "sample only among the likeliest tokens whose probabilities add up to p (the nucleus; 1: all)");
    t.choice("--kv-cache", c.kv_cache, {"on", "off"}, "sample through a KV cache (on) or rerun the whole context per token (off); the same tokens");
    t.text("--prompt", c.prompt, "text the samples continue (--tokenizer char: its characters must be in the vocabulary)");
    t.integer("--heatmap-layer", c.heatmap_layer, -1, 255, "block whose attention attention.png shows (-1: the last; below --n-layer)");
    t.integer("--heatmap-head", c.heatmap_head, 0, 255, "head whose attention attention.png shows (below --n-head)");
    t.integer("--neighbours", c.neighbours, 0, 1000, "after training (and with --eval-only): the 5 nearest tokens, by cosine in the token table, of the N most frequent tokens of train (--tokenizer bpe: of 3 bytes or more; 0: none)");
    t.flag("--verbose", c.verbose, "print the optimizer memory table of every parameter tensor, not only the 5 largest");
    t.integer("--profile", c.profile, 0, 1000, "profile N steps after the run's first 5 (warm-up) with xgrad's profiler: print the table of ops by self time and the time per step by category, write trace.json (Perfetto, chrome://tracing) and profile.png (time by category; live bytes, the peak marked) in --out (0: off)");
}

// Lower bounds on the memory the flags ask for, against the machine's (check_flags).
void check_memory_needs(const Config& c) {
    const GPTConfig& m = c.model;
    const examples::BatchSplit split = examples::split_batch(c.batch_size, c.grad_accum);
    // Lower bounds in bytes (model.hpp's and llama.hpp's shapes): L·(4d² + k·d·F) weights
    // (attention 4d² at most, the feed-forward's k = 2 matrices of d × 4d, or LLaMA's k = 3 of
    // d × F), each with its gradient and AdamW's two moments; and the feed-forward's (b, T, F)
    // hidden activation of one micro-batch, b = B/(W·N), which each of the L blocks keeps.
    const bool llama = m.arch == "llama";
    const double L = double(m.n_layer), d = double(m.d), B = double(split.per_rank()), T = double(m.block);
    const double F = llama ? double(m.ffn_hidden > 0 ? m.ffn_hidden : nn::swiglu_hidden_width(m.d)) : 4 * d;
    const double bytes = sizeof(real), per_layer = 4 * d * d + (llama ? 3 : 2) * d * F;
    const examples::MemoryNeed weights{"parameters L·(4d² + k·d·F), with gradients and AdamW's exp_avg and exp_avg_sq",
                                       4 * L * per_layer * bytes};
    // Every rank draws the whole step's batch, B offsets and B windows x, y of T int64 ids, and
    // keeps it through the step and its evaluation. An evaluation holds the offsets of its
    // E·B windows, one batch of B windows and a feed-forward output (B, T, F). All in doubles:
    // B·E·8 and the like may not fit in 64 bits.
    const double B_all = double(c.batch_size), E = double(c.eval_batches), id = 8;
    const examples::MemoryNeed batch{"the step's batch: B offsets and the windows x, y (B, T) of int64 ids",
                                     B_all * (1 + 2 * T) * id};
    // Byte pairs: the token table (V, d), and the untied head's, with gradients and AdamW's
    // moments; the logits (b, T, V) and the cross-entropy's softmax of one micro-batch, kept for
    // backward; an evaluation's logits (B, T, V). (Characters: V ≤ 256, a small share.)
    const double V = c.tokenizer == "bpe" ? double(c.vocab_size) : 0;
    const examples::MemoryNeed table{"the token table V·d (and an untied head's), with gradients and AdamW's moments",
                                     (m.tie ? 1 : 2) * 4 * V * d * bytes};
    const std::string shape = fmt::format("--block-size {}, --d {}{} --n-layer {}{}{}", m.block, m.d, llama ? "," : " or",
                                          m.n_layer, llama ? fmt::format(" or --ffn-hidden {}", std::int64_t(F)) : "",
                                          V > 0 ? fmt::format(" or --vocab-size {}", c.vocab_size) : "");
    std::vector<examples::MemoryNeed> held{weights, batch};
    if (V > 0) held.push_back(table);
    examples::check_memory(held, fmt::format("--batch-size {}, {}", c.batch_size, shape));
    std::vector<examples::MemoryNeed> step = held;
    step.push_back({"the feed-forward activations L·b·T·F kept for backward (b = B/(ranks·N))", L * B * T * F * bytes});
    if (V > 0) step.push_back({"the logits b·T·V and their softmax, kept for backward", 2 * B * T * V * bytes});
    examples::check_memory(step, fmt::format("--batch-size {} (or raise --grad-accum), {}", c.batch_size, shape));
    std::vector<examples::MemoryNeed> eval = held;
    eval.push_back({fmt::format("an evaluation: E·B offsets, B windows x, y and a feed-forward output B·T·F{}",
                                V > 0 ? " and the logits B·T·V" : ""),
                    (E * B_all + B_all * (1 + 2 * T)) * id + B_all * T * (F + V) * bytes});
    examples::check_memory(eval, fmt::format("--batch-size {}, --eval-batches {}, {}", c.batch_size, c.eval_batches, shape));
}

// The flag that sets a field of GPTConfig, for check_config's messages.
std::string flag_of(const std::string& field) {
    if (field == "block") return "--block-size";
    if (field == "untied") return "--no-tie";
    std::string flag = "--" + field;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

// --lora-*: adapters need a trained base (--init-from, or --resume of a LoRA run), and the
// targets must name layers of this model. Throws std::invalid_argument naming the flags.
void check_lora_flags(const examples::FlagTable& table, const Config& c) {
    using examples::require;
    for (const char* name : {"--lora-alpha", "--lora-targets", "--merge-lora"})
        require(c.lora_rank > 0 || !table.given(name), fmt::format("{} sets the LoRA adapters: it needs --lora-rank r > 0", name));
    if (c.lora_rank == 0) return;
    require(!c.init_from.empty() || !c.resume.empty(),
            fmt::format("--lora-rank {} adapts a trained model: pass --init-from CHECKPOINT (the base) or --resume a "
                        "LoRA run's checkpoint", c.lora_rank));
    const LoRATargets targets = lora_targets(c.lora_targets, c.model.arch, c.model.tie);  // throws for an unknown word
    const bool adapts_table = std::find(targets.paths.begin(), targets.paths.end(), c.model.arch == "llama" ? "tok_embeddings"
                                                                                                    : "transformer.wte") != targets.paths.end();
    require(!(c.merge_lora && adapts_table && c.model.tie),
            "--merge-lora with --lora-targets embedding: the token table is the head (tied), so merging its adapter "
            "would move the head too; drop --merge-lora (the adapter folder, or --init-from the checkpoint with the "
            "--lora-* flags, holds the model), or train the base with --no-tie");
}

// Every check that needs no data. Throws std::invalid_argument naming the flags.
void check_flags(const examples::FlagTable& table, const Config& c) {
    using examples::require;
    GPTConfig shape = c.model;
    shape.vocab = 1;  // V comes from the text; the model's constructor checks it
    try {
        check_config(shape, "gpt", flag_of);
    } catch (const ValueError& e) {
        const std::string what = e.what();
        throw std::invalid_argument(what.substr(what.find(": ") + 2));  // the flags' message, without "gpt: "
    }
    examples::split_batch(c.batch_size, c.grad_accum);  // throws unless W·N divides B
    require(c.warmup <= c.steps, fmt::format("--warmup {} is longer than --steps {}: pass --warmup {} or less", c.warmup, c.steps, c.steps));
    require(c.min_lr <= c.lr, fmt::format("--min-lr {} is above --lr {}", c.min_lr, c.lr));
    require(c.heatmap_layer < shape.n_layer, fmt::format("--heatmap-layer {} is outside [-1, {}): the model has --n-layer {} "
                                                         "blocks (-1: the last)", c.heatmap_layer, shape.n_layer, shape.n_layer));
    require(c.heatmap_head < shape.n_head, fmt::format("--heatmap-head {} is outside [0, {}): the model has --n-head {} heads",
                                                       c.heatmap_head, shape.n_head, shape.n_head));
    require(!c.eval_only || !c.resume.empty() || !c.init_from.empty(),
            "--eval-only needs --resume CHECKPOINT or --init-from CHECKPOINT");
    require(c.val_data.empty() || !c.data.empty(), "--val-data needs --data: the text it validates");
    check_lora_flags(table, c);
    require(!c.eval_only || c.profile == 0, "--profile N profiles training steps: --eval-only takes none");
    const bool stops_early = c.stop_after > 0 && c.stop_after < c.steps;
    examples::check_profile_window(c.profile, 0, stops_early ? c.stop_after : c.steps, stops_early ? "--stop-after" : "--steps");
    require(c.resume.empty() || c.init_from.empty(),
            "--resume continues a run exactly and --init-from starts a new one from its weights: pass one of them");
    require(c.tokenizer == "bpe" || !table.given("--vocab-size"),
            fmt::format("--vocab-size {} sets the number of byte-pair tokens: it needs --tokenizer bpe (--tokenizer "
                        "char takes the text's characters as they are)", c.vocab_size));
    check_memory_needs(c);
}

}  // namespace

void add_flags(examples::FlagTable& table, Config& cfg) {
    add_model_flags(table, cfg);
    add_training_flags(table, cfg);
    add_lora_flags(table, cfg);
    add_output_flags(table, cfg);
    table.checkpoint("--resume", cfg.resume, "checkpoint.safetensors to continue from; the text and every flag but " +
                     table.names_without(kResume) + " must match the saved run's (at any number of ranks); "
                     "--tokenizer bpe reads tokenizer.bpe beside it");
    table.checkpoint("--init-from", cfg.init_from, "checkpoint.safetensors whose model weights start this run (nanoGPT's "
                     "init_from): AdamW, the schedule and the batches start afresh at step 0, for --steps more; the "
                     "model flags (" + table.names_with(kModel) + ") and the vocabulary must match the saved run's; "
                     "--tokenizer bpe reads tokenizer.bpe beside it. Also a model.safetensors (e.g. --merge-lora's), "
                     "or a LoRA run's checkpoint with its --lora-* flags (the base and its adapters)");
}

void finish_flags(const examples::FlagTable& table, Config& cfg) {
    GPTConfig& m = cfg.model;
    if (m.arch == "llama" && !table.given("--pos")) m.pos = "rope";  // LLaMA's positions
    if (m.arch == "llama") cfg.no_bias = true;                         // and no biases
    m.tie = !cfg.no_tie;
    m.bias = !cfg.no_bias;
    if (!table.given("--warmup")) cfg.warmup = std::min(cfg.warmup, cfg.steps / 10);
    cfg.prompt_given = table.given("--prompt");
    check_flags(table, cfg);
}

}  // namespace gpt
