// examples/gpt/main.cpp — train a GPT on the King James Bible, on characters or byte-pair tokens.
//
// nanoGPT's shakespeare_char CPU run, on the KJV: characters are tokens (V = 73), the first 90%
// of the text trains, the last 10% validates (--tokenizer bpe: V = --vocab-size byte pairs learnt
// on the training text, tokens.hpp, and the losses per token and per character). The model
// (model.hpp) is L 4 pre-LayerNorm blocks of 4-head causal self-attention and a 4x MLP at width
// d 128, reading 64 characters, with the head tied to the token table; AdamW (lr 1e-3, betas
// 0.9/0.99, weight decay 0.1 on the 2-D weights only) with 100 warmup steps and a cosine decay to
// 1e-4, gradients clipped at norm 1, 2,000 steps of 12 windows. Then it reports the losses
// against a bigram baseline, samples text (through a KV cache, generate.hpp), and draws the loss
// curve and one head's attention.
// --arch llama trains the same way with LLaMA's block (llama.hpp).
// --checkpoint-blocks keeps only each block's input and recomputes the block in backward: the same
// losses with less memory (README.md, "Long context: memory"); the run ends with its peak RSS.
//
// Run:  build/examples/gpt                 (the defaults; minutes on one core)
//       build/examples/gpt --help          (every flag, with units and defaults)
//       mpirun -np 2 build/examples/gpt    (2 processes, each on its half of every batch; README.md)
// Writes to --out: loss.csv, loss_ema.csv, loss.png, attention.csv, attention.png,
// checkpoint.safetensors (model, optimizer and the text's vocabulary, for --resume and --init-from),
// model.safetensors (the weights under nanoGPT's names, for bench/gpt_to_torch.py, with the
// vocabulary sampling needs) and, with --tokenizer bpe, tokenizer.bpe (text::Tokenizer::save).
// Under mpirun every rank trains the same model on its slice of each batch (common/data_parallel.hpp)
// and rank 0 alone prints and writes; --zero 1 or 2 shards AdamW's state (and the reduced
// gradients) over the ranks (distributed/zero.hpp) instead of keeping all of it on every rank.
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/checkpoint.hpp"  // save/load of model + optimizer + sampler state
#include "common/cli.hpp"         // strict numeric flags, up-front checks, parse_and_run
#include "common/data_parallel.hpp"  // the batch rule of W ranks × --grad-accum, rank 0's stdout
#include "common/outputs.hpp"     // --out's files checked up front, saved one by one
#include "common/run_log.hpp"     // LossLog, Progress, plot_losses, now_seconds
#include <xgrad/core/parse.hpp>    // quoted_text
#include <xgrad/core/threads.hpp>
#include <xgrad/data/text_source.hpp>  // read_bible, read_text_file
#include <xgrad/distributed/ddp.hpp>
#include <xgrad/distributed/zero.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/train/state.hpp>  // first_non_finite, fingerprint_metadata
#include "data.hpp"
#include "generate.hpp"
#include "model.hpp"
#include "report.hpp"
#include "tokens.hpp"

using namespace xgrad;
using namespace gpt;
using examples::LossLog;
using examples::Progress;
using examples::RunFlags;

struct Config {
    GPTConfig model;              // L 4, H 4, d 128, block 64, pos learned, tied, biases, dropout 0
    int steps = 2000;             // optimizer steps (iterations) in the whole run
    int batch_size = 12;          // B, windows of block+1 characters per step, over all ranks
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
    bool kv_cache = true;         // sample through the KV cache (generate.hpp)
    std::string prompt = "And God said";
    std::string heatmap_text = "Ge1:1 In the beginning God created the heaven and the earth.";
    int heatmap_layer = -1;       // -1: the last block
    int heatmap_head = 0;
    bool verbose = false;         // the optimizer's full memory table instead of its summary
    int neighbours = 0;           // frequent tokens whose nearest tokens are printed at the end (0: none)
    int zero = 0;                 // 0: DistributedDataParallel; 1, 2: ZeRO's stage (distributed/zero.hpp)
};

static double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// The flags that shape the trajectory; a checkpoint records them and --resume must repeat them.
static RunFlags trajectory_flags(const Config& c) {
    const GPTConfig& m = c.model;
    return {{"--steps", std::to_string(c.steps)},          {"--batch-size", std::to_string(c.batch_size)},
            {"--lr", fmt::format("{}", c.lr)},              {"--min-lr", fmt::format("{}", c.min_lr)},
            {"--warmup", std::to_string(c.warmup)},         {"--beta1", fmt::format("{}", c.beta1)},
            {"--beta2", fmt::format("{}", c.beta2)},        {"--weight-decay", fmt::format("{}", c.weight_decay)},
            {"--grad-clip", fmt::format("{}", c.grad_clip)}, {"--seed", std::to_string(c.seed)},
            {"--data", c.data},                             {"--n-layer", std::to_string(m.n_layer)},
            {"--n-head", std::to_string(m.n_head)},         {"--d", std::to_string(m.d)},
            {"--block-size", std::to_string(m.block)},      {"--pos", m.pos},
            {"--no-tie", m.tie ? "false" : "true"},         {"--no-bias", m.bias ? "false" : "true"},
            {"--dropout", fmt::format("{}", m.dropout)},    {"--eval-batches", std::to_string(c.eval_batches)},
            {"--arch", m.arch},                             {"--n-kv-head", std::to_string(m.n_kv_head)},
            {"--ffn-hidden", std::to_string(m.ffn_hidden)}, {"--tokenizer", c.tokenizer},
            {"--sparse-embedding", m.sparse_embedding ? "true" : "false"}};
}

// trajectory_flags and, for byte pairs, --vocab-size.
static RunFlags run_flags(const Config& c) {
    RunFlags flags = trajectory_flags(c);
    if (c.tokenizer == "bpe") flags["--vocab-size"] = std::to_string(c.vocab_size);
    return flags;
}

// What every rank must agree on (common/data_parallel.hpp): the trajectory, and what sets how
// many collectives a run calls. --grad-accum and the number of ranks change the rounding only;
// --zero changes neither the steps nor the checkpoint, only which collectives run.
static examples::RunFlags same_on_all_ranks(const Config& c) {
    RunFlags flags = run_flags(c);
    flags["--zero"] = std::to_string(c.zero);
    flags["--grad-accum"] = std::to_string(c.grad_accum);
    flags["--stop-after"] = std::to_string(c.stop_after);
    flags["--eval-only"] = c.eval_only ? "true" : "false";
    return flags;
}

// ---- the steps of a run, in the order run() takes them ------------------------------------------

// The output directory, where rank 0 will write every file below (each checked now, so that a
// path in the way stops the run before its first step), and, on several ranks or micro-steps,
// how a batch is split over them (common/data_parallel.hpp).
static examples::BatchSplit prepare_run(const Config& cfg) {
    set_num_threads(cfg.threads);
    const examples::BatchSplit batch_split = examples::split_batch(cfg.batch_size, cfg.grad_accum);
    if (batch_split.world > 1 || batch_split.accum > 1)
        fmt::print("{}\n", examples::world_line(batch_split, cfg.threads, "windows"));
    if (cfg.zero > 0)
        fmt::print("ZeRO   stage {}: each rank keeps the optimizer state{} of its own parameters only (the memory "
                   "figures before training are the whole model's; the table at the end gives this rank's share)\n",
                   cfg.zero, cfg.zero == 2 ? " and the reduced gradients" : "");
    std::error_code ec;
    if (distributed::rank() == 0) std::filesystem::create_directories(cfg.out, ec);
    if (ec) throw std::runtime_error(fmt::format("--out {}: cannot create the directory ({})", cfg.out, ec.message()));
    std::vector<std::string> files{"loss.csv",      "loss_ema.csv", "loss.gp",  "loss.png", "attention.csv",
                                   "attention.gp",  "attention.png", "checkpoint.safetensors", "model.safetensors"};
    if (cfg.tokenizer == "bpe") files.push_back("tokenizer.bpe");
    if (distributed::rank() == 0) examples::check_output_files(cfg.out, files);
    return batch_split;
}

// The text as ids: its tokens, the 90/10 split, and the fingerprint stored in every file written.
struct TextData {
    Tokens tokens;                        // characters or byte pairs
    Split split;                          // ids: train (the first 90%), val (the rest)
    train::TextFingerprint fingerprint;
};

// --tokenizer char: each byte of the text is a token; V is the bytes that occur.
static TextData character_data(const Config& cfg, const std::string& text, const std::string& source) {
    Vocab vocab = Vocab::from_text(text);
    Split split = split_ids(vocab.encode(text), int(cfg.model.block), source);
    fmt::print("data   {}: {} characters, V {} → train {} / val {} characters\n", source, text.size(), vocab.size(),
               split.train.size(), split.val.size());
    train::TextFingerprint fingerprint = train::fingerprint(vocab.chars, text);
    return {Tokens::characters(std::move(vocab)), std::move(split), std::move(fingerprint)};
}

// --tokenizer bpe: the text split first, the tokenizer learnt on the training part (or, with
// --resume and --init-from, read from beside the checkpoint), then both parts encoded.
static TextData byte_pair_data(const Config& cfg, const std::string& text, const std::string& source) {
    const TextSplit parts = split_text(text);
    fmt::print("data   {}: {} characters → train {} / val {} characters\n", source, text.size(), parts.train.size(),
               parts.val.size());
    const std::string& saved = cfg.resume.empty() ? cfg.init_from : cfg.resume;
    const double t0 = examples::now_seconds();
    Tokens tokens = Tokens::byte_pairs(saved.empty() ? train_bpe(parts.train, cfg.vocab_size)
                                                     : load_bpe_beside(saved, cfg.vocab_size,
                                                                       cfg.resume.empty() ? "--init-from" : "--resume"));
    const double t1 = examples::now_seconds();
    Split split = split_tokens(tokens.encode(std::string(parts.train)), tokens.encode(std::string(parts.val)),
                               int(cfg.model.block), source);
    const std::string how = saved.empty() ? fmt::format("learnt on the train characters in {:.1f} s", t1 - t0)
                                          : "read from " + tokenizer_beside(saved);
    fmt::print("tokens BPE V {} ({}; encoded in {:.1f} s) → train {} / val {} tokens, {:.2f} characters per token\n",
               tokens.size(), how, examples::now_seconds() - t1, split.train.size(), split.val.size(),
               double(parts.train.size()) / double(split.train.size()));
    train::TextFingerprint fingerprint = train::fingerprint(tokens.fingerprint_vocab(), text);
    fingerprint.tokenizer = tokens.identity();
    return {std::move(tokens), std::move(split), std::move(fingerprint)};
}

static TextData load_data(const Config& cfg, bool prompt_given) {
    const std::string source = cfg.data.empty() ? "the KJV (bible -f \"gen1:1-rev22:21\")" : cfg.data;
    const std::string text = cfg.data.empty() ? xgrad::data::read_bible() : xgrad::data::read_text_file(cfg.data);
    TextData d = cfg.tokenizer == "bpe" ? byte_pair_data(cfg, text, source) : character_data(cfg, text, source);
    if (prompt_given && cfg.sample > 0) {  // a prompt the text cannot encode is refused now, not after training
        try {
            d.tokens.encode(cfg.prompt);
        } catch (const std::exception& e) {
            throw std::invalid_argument(fmt::format("--prompt {}: {}", quoted_text(cfg.prompt), e.what()));
        }
    }
    return d;
}

// The flags that fix the model's shape: --init-from needs the saved model's values of all of them.
static RunFlags model_flags(const Config& c) {
    const RunFlags all = run_flags(c);
    RunFlags flags;
    for (const char* f : {"--arch", "--n-layer", "--n-head", "--n-kv-head", "--d", "--ffn-hidden", "--block-size",
                          "--pos", "--no-tie", "--no-bias", "--tokenizer", "--vocab-size"})
        if (all.count(f)) flags[f] = all.at(f);
    return flags;
}

// Where the run starts; returns the step. --resume: the model, AdamW's moments, the step and the
// batch sampler as saved, the schedule at that step (the run continues exactly). --init-from
// (nanoGPT's init_from): the saved model's weights only; AdamW, the schedule and the batches start
// afresh at step 0 (training a finished model further).
// `load_optimizer` takes the saved AdamW state: optimizer.load_state_dict, or under ZeRO each
// rank's share of it (collective: every rank reads the file).
static int restore(const Config& cfg, LanguageModel& model,
                   const std::function<void(const optim::OptimizerState&)>& load_optimizer,
                   optim::CosineWithWarmup& schedule, std::mt19937_64& batch_rng, const RunFlags& flags,
                   const train::TextFingerprint& data) {
    if (!cfg.init_from.empty()) {
        const int saved = examples::load_model_weights(cfg.init_from, model, model_flags(cfg), data.vocab, data.tokenizer);
        fmt::print("init   {}: the weights after its step {}; a new AdamW and schedule, steps 0 to {}\n",
                   cfg.init_from, saved, cfg.steps);
        return 0;
    }
    if (cfg.resume.empty()) return 0;
    const int start = examples::load_checkpoint(cfg.resume, model, load_optimizer, batch_rng, flags, data);
    schedule.set_step(start);
    fmt::print("resume {} at step {}\n", cfg.resume, start);
    return start;
}

static void print_model(const LanguageModel& model) {
    const GPTConfig& m = model.config();
    const std::string kv_heads = m.n_kv_head == 0 ? "" : fmt::format(" (K/V heads {})", m.n_kv_head);
    fmt::print("model  {}: L {}, H {}{}, d {}, block {}, pos {}, head {}: {} parameters{}\n",
               m.arch == "llama" ? "LLaMA" : "GPT", m.n_layer, m.n_head, kv_heads, m.d, m.block, m.pos,
               m.tie ? (m.arch == "llama" ? "tied to tok_embeddings" : "tied to wte") : "untied", model.num_parameters(),
               m.tie ? " (the tied table counted once)" : "");
}

// attention.csv/png: one head's weights on Genesis 1:1, or (a character vocabulary without
// those characters) on the start of val. Returns the note to print.
static std::string draw_heatmap(const Config& cfg, LanguageModel& model, const TextData& d) {
    const GPTConfig& m = model.config();
    std::string line = cfg.heatmap_text;
    if (!d.tokens.is_bpe() &&
        std::any_of(line.begin(), line.end(), [&](char ch) { return d.tokens.vocab().id[static_cast<unsigned char>(ch)] < 0; }))
        line = d.tokens.decode(Ids(d.split.val.begin(), d.split.val.begin() + std::min<std::ptrdiff_t>(m.block, 60)));
    const std::int64_t layer = cfg.heatmap_layer < 0 ? m.n_layer - 1 : cfg.heatmap_layer;
    return plot_attention(model, d.tokens, line, layer, cfg.heatmap_head, cfg.out);
}

// --neighbours N: the N most frequent tokens of the training ids (byte pairs: of 3 bytes or more,
// so that words show rather than letters), each with the 5 tokens nearest it by the cosine of
// their rows of the token table (report.hpp).
static void print_neighbours(const Config& cfg, const LanguageModel& model, const TextData& d) {
    const std::size_t min_bytes = d.tokens.is_bpe() ? 3 : 1;
    const std::vector<std::int64_t> queries = frequent_tokens(d.split.train, d.tokens, std::size_t(cfg.neighbours), min_bytes);
    const Tensor& table = model.token_embedding().weight;
    fmt::print("\nnearest tokens by cosine in the token table {}, for the {} most frequent tokens{} of train:\n{}",
               shape_str(table.shape()), queries.size(), min_bytes > 1 ? " of 3 bytes or more" : "",
               nearest_tokens(table.data(), d.tokens, queries, 5));
}

// --eval-only: the fixed-set validation loss (bench/gpt_to_torch.py compares this line with
// PyTorch's figure), per character too for byte pairs, the heatmap and --neighbours.
static int evaluate_only(const Config& cfg, LanguageModel& model, const TextData& d) {
    const EvalLoss val = evaluate_fixed(model, d.split.val, cfg.batch_size, cfg.eval_batches, d.tokens.byte_counts());
    fmt::print("val (fixed set) {:.6f} nats over {} batches of {}{}\n", val.per_token, cfg.eval_batches, cfg.batch_size,
               d.tokens.is_bpe() ? fmt::format(" ({:.6f} nats/char)", val.per_char) : "");
    if (distributed::rank() != 0) return 0;
    if (cfg.neighbours > 0) print_neighbours(cfg, model, d);
    examples::FinalSaves saves;
    saves.attempt(cfg.out + "/attention.png", [&] { fmt::print("{}\n", draw_heatmap(cfg, model, d)); });
    saves.check();  // not written: exit status 1
    return 0;
}

// The graph's memory, once, on the first fixed validation windows (no rng drawn). A rank's graph
// holds one micro-batch of b = B/(W·N) windows at a time.
static void print_graph_memory(LanguageModel& model, const Ids& val, int b) {
    const int T = int(model.config().block);
    const Batch w = windows(val, fixed_offsets(val.size(), T, std::size_t(b)), T);
    const std::size_t before = malloc_in_use();
    Tensor loss = nn::functional::cross_entropy(model.forward(w.x), w.y);
    fmt::print("{}", graph_memory_report(loss, model, b, malloc_in_use() - before));
}

// The forwards and backwards of one step on the B windows of `batch`: micro-step k takes this
// rank's b of them (common/data_parallel.hpp) and adds ∇(CE_k / N) to the gradients. Returns
// Σ_k CE_k / N, this rank's mean over its N·b windows (nats).
static double accumulate_gradients(LanguageModel& model, const Batch& batch, const examples::BatchSplit& batch_split,
                                   const Config& cfg) {
    double loss_sum = 0;
    for (int k = 0; k < cfg.grad_accum; ++k) {
        const Batch mb = examples::micro_batch(batch, batch_split, k);                // (b, T), (b, T)
        Tensor loss = nn::functional::cross_entropy(model.forward(mb.x), mb.y) / real(cfg.grad_accum);  // ()
        loss.backward();  // the gradients add up over the micro-steps
        loss_sum += loss.item();
    }
    return loss_sum;
}

// One optimizer step: DDP averages the W ranks' gradient sums, so every rank holds ∇ of the mean
// loss over the B windows and takes the same step. Returns accumulate_gradients' loss.
static double data_parallel_step(LanguageModel& model, optim::Optimizer& opt, distributed::DistributedDataParallel& ddp,
                                 const Batch& batch, const examples::BatchSplit& batch_split, const Config& cfg) {
    opt.zero_grad();
    const double loss_sum = accumulate_gradients(model, batch, batch_split, cfg);
    ddp.sync_gradients();  // ∇ ← the mean of the W ranks' ∇
    clip_gradients(model, cfg.grad_clip);
    opt.step();
    return loss_sum;
}

// The same step under ZeRO (--zero 1, 2): each rank receives the mean gradient of its own
// parameters only, clips with the whole model's norm, steps its own parameters, and receives the
// others' updated ones. The same numbers as data_parallel_step (distributed/zero.hpp).
static double zero_step(LanguageModel& model, distributed::ZeroRedundancyOptimizer& zero, const Batch& batch,
                        const examples::BatchSplit& batch_split, const Config& cfg) {
    zero.zero_grad();
    const double loss_sum = accumulate_gradients(model, batch, batch_split, cfg);
    zero.reduce_scatter_gradients();  // this rank's parameters: ∇ ← the mean of the W ranks' ∇
    zero.clip_grad_norm_(cfg.grad_clip > 0 ? cfg.grad_clip : std::numeric_limits<double>::infinity());  // 0: off
    zero.step();  // AdamW on this rank's parameters, then the all-gather of every rank's
    return loss_sum;
}

// After step `step` (1-based): the validation loss every --eval-every steps and at the last
// (every rank evaluates: the same weights give the same value, so a divergence stops all), and
// every 10 steps a row of loss.csv (rank 0's) and the progress line; byte pairs add the
// validation loss per character to both.
static void log_step(const Config& cfg, LanguageModel& model, const TextData& d, int step, double train_loss, double lr,
                     std::optional<LossLog>& log, Progress& progress) {
    const bool eval = step % cfg.eval_every == 0 || step == cfg.steps;
    const EvalLoss val = eval ? evaluate_fixed(model, d.split.val, cfg.batch_size, cfg.eval_batches, d.tokens.byte_counts())
                              : EvalLoss{nan(), nan()};
    if (eval) examples::check_finite_loss(step, val.per_token, "validation");
    const double per_char = d.tokens.is_bpe() ? val.per_char : nan();
    if (log && (step % 10 == 0 || eval)) log->write(step, train_loss, val.per_token, lr, per_char);
    if (step % 10 == 0 || eval) progress.update(step, train_loss, lr, val.per_token, per_char);
}

// checkpoint.safetensors (for --resume and --init-from) and model.safetensors (nanoGPT's names,
// with the vocabulary sampling needs), and for byte pairs tokenizer.bpe beside them; each tried
// even if another fails (a full disk). `optimizer_state`: AdamW's whole state (ZeRO: gathered).
static void save(const Config& cfg, const LanguageModel& model, const optim::OptimizerState& optimizer_state, int step,
                 const std::mt19937_64& batch_rng, const RunFlags& flags, const TextData& d,
                 examples::FinalSaves& saves) {
    if (d.tokens.is_bpe())
        saves.attempt(cfg.out + "/tokenizer.bpe", [&] { d.tokens.tokenizer().save(cfg.out + "/tokenizer.bpe"); });
    saves.attempt(cfg.out + "/checkpoint.safetensors", [&] {
        examples::save_checkpoint(cfg.out + "/checkpoint.safetensors", model, optimizer_state, step, batch_rng, flags,
                                  d.fingerprint);
    });
    saves.attempt(cfg.out + "/model.safetensors", [&] {
        const NamedTensors weights = model.state_dict();
        const std::string bad = train::first_non_finite(weights);
        if (!bad.empty()) throw std::runtime_error(fmt::format("'{}' holds a NaN or an infinity (the run diverged)", bad));
        nn::Metadata model_meta = train::fingerprint_metadata(d.fingerprint);
        model_meta["format"] = "pt";
        nn::save_safetensors(cfg.out + "/model.safetensors", weights, model_meta);
    });
}

// The final losses against the bigram baseline, and the wall time since t0. Byte pairs: per token
// and per character (tokens.hpp), the baseline too.
static void print_losses(const Config& cfg, LanguageModel& model, const TextData& d, double t0, int start) {
    std::mt19937_64 eval_rng(cfg.seed + 1);
    const std::vector<std::int64_t>& bytes = d.tokens.byte_counts();
    const EvalLoss val_fixed = evaluate_fixed(model, d.split.val, cfg.batch_size, cfg.eval_batches, bytes);
    const EvalLoss val_random = evaluate_random(model, d.split.val, cfg.batch_size, cfg.eval_batches, eval_rng, bytes);
    const EvalLoss train_random = evaluate_random(model, d.split.train, cfg.batch_size, cfg.eval_batches, eval_rng, bytes);
    const std::int64_t V = d.tokens.size();
    const BigramLoss bigram_train = bigram_loss(d.split.train, d.split.train, V, bytes);
    const BigramLoss bigram_val = bigram_loss(d.split.train, d.split.val, V, bytes);
    // Characters: one figure per line, per token = per character. Byte pairs: both.
    const bool bpe = d.tokens.is_bpe();
    fmt::print("\n{} train {:.4f}   val {:.4f}   ({} batches of {}: train random, val the fixed set; val over {} "
               "random batches {:.4f})\n",
               bpe ? "loss (nats/token)" : "loss (nats)     ", train_random.per_token, val_fixed.per_token,
               cfg.eval_batches, cfg.batch_size, cfg.eval_batches, val_random.per_token);
    if (bpe)
        fmt::print("loss (nats/char)  train {:.4f}   val {:.4f}   (the same windows: Σ token losses / Σ bytes of the "
                   "target tokens; val over {} random batches {:.4f})\n",
                   train_random.per_char, val_fixed.per_char, cfg.eval_batches, val_random.per_char);
    fmt::print("{} train {:.4f}   val {:.4f}   (add-one smoothed counts {}from train)\n",
               bpe ? "bigram nats/token" : "bigram baseline ", bigram_train.per_token, bigram_val.per_token,
               bpe ? "of token pairs " : "");
    if (bpe) fmt::print("bigram nats/char  train {:.4f}   val {:.4f}\n", bigram_train.per_char, bigram_val.per_char);
    fmt::print("wall time        {:.1f} s{}\n", examples::now_seconds() - t0,
               start > 0 ? " (this process, since the resume)" : "");
}

// AdamW keeps exp_avg and exp_avg_sq: 8 bytes per parameter (ZeRO: on the owner rank only). The 5
// largest tensors, or all.
static void print_optimizer_memory(const optim::MemoryReport& memory, bool verbose) {
    fmt::print("\noptimizer memory after training ({})\n",
               verbose ? std::string("every tensor")
                       : fmt::format("the 5 largest of {} tensors; --verbose for all", memory.rows.size()));
    if (verbose) std::cout << memory << "\n";
    else fmt::print("{}\n", optim::memory_summary(memory, 5));
}

// --sample tokens after the prompt (generate.hpp), and what the KV cache held.
static void print_samples(const Config& cfg, LanguageModel& model, const TextData& d, bool prompt_given) {
    std::string prompt = cfg.prompt;
    if (!prompt_given && !d.tokens.is_bpe()) {  // the default prompt, in a text that lacks its characters
        const bool ok = std::all_of(prompt.begin(), prompt.end(),
                                    [&](char ch) { return d.tokens.vocab().id[static_cast<unsigned char>(ch)] >= 0; });
        if (!ok) prompt = d.tokens.decode(Ids(d.split.val.begin(), d.split.val.begin() + 1));
    }
    const std::string unit = d.tokens.is_bpe() ? "tokens" : "characters";
    std::mt19937_64 sample_rng(cfg.seed);
    const auto gen = nn::GenerationOptions().max_new_tokens(cfg.sample).temperature(cfg.temperature).top_k(cfg.top_k)
                         .use_cache(cfg.kv_cache);
    nn::GenerationStats stats;
    const double t_sample = examples::now_seconds();
    const std::string text_out = sample_text(model, d.tokens, prompt, gen, sample_rng, &stats);
    const double seconds = examples::now_seconds() - t_sample;
    // Byte pairs: the prompt and the sample as one text, ill-formed UTF-8 as U+FFFD (as minbpe), so
    // that a character the sample completes is kept whole.
    fmt::print("\n{} sampled {} (temperature {}, top-k {}) after the prompt:\n{}\n", cfg.sample, unit,
               cfg.temperature, cfg.top_k == 0 ? std::string("off") : std::to_string(cfg.top_k),
               d.tokens.is_bpe() ? replace_invalid_utf8(prompt + text_out) : prompt + text_out);
    fmt::print("\nsampling  {:.1f} {}/s, KV cache {}: {} positions run through the model for {} {}", cfg.sample / seconds,
               unit, cfg.kv_cache ? "on" : "off", stats.positions_run, cfg.sample, unit);
    if (cfg.kv_cache) {
        const std::size_t layer = stats.cache_bytes.empty() ? 0 : stats.cache_bytes.front();
        fmt::print(" ({} rebuilt past the block)\nKV cache  {} layers × {} = {}: {} bytes per position "
                   "(2 · L · K/V heads · hd · 4 B) × block {}",
                   stats.rebuilds, stats.cache_bytes.size(), optim::human_bytes(layer),
                   optim::human_bytes(layer * stats.cache_bytes.size()), model.kv_cache_bytes_per_token(),
                   model.config().block);
    }
    fmt::print("\n");
}

// Rank 0, after the last step: the losses, the optimizer's memory, the samples, the pictures.
static void print_results(const Config& cfg, LanguageModel& model, const TextData& d, const optim::MemoryReport& memory,
                          double t0, int start, bool prompt_given, examples::FinalSaves& saves) {
    print_losses(cfg, model, d, t0, start);
    print_optimizer_memory(memory, cfg.verbose);
    if (cfg.sample > 0) print_samples(cfg, model, d, prompt_given);
    if (cfg.neighbours > 0) print_neighbours(cfg, model, d);
    if (saves.all_written())
        fmt::print("\nwrote {0}/loss.csv, {0}/checkpoint.safetensors{1} {0}/model.safetensors{2}\n", cfg.out,
                   d.tokens.is_bpe() ? "," : " and", d.tokens.is_bpe() ? fmt::format(" and {}/tokenizer.bpe", cfg.out) : "");
    // One row per 10 steps: an EMA of weight 0.9 averages about the last 10 rows, 100 steps.
    saves.attempt(cfg.out + "/loss.png", [&] {
        fmt::print("{}\n", examples::plot_losses(cfg.out, "gpt: cross-entropy loss (nats)", "[1.0:4.5]", 0.9));
    });
    saves.attempt(cfg.out + "/attention.png", [&] { fmt::print("{}\n", draw_heatmap(cfg, model, d)); });
    saves.check();  // a failed save: exit status 1, naming what was written and what not
}

// ---- the run: data, model, loop, save, then the reports (as nanoGPT's train.py) ------------------
static int run(const Config& cfg, bool prompt_given) {
    const double t0 = examples::now_seconds();
    const bool rank0 = distributed::rank() == 0;  // rank 0 alone writes files (and alone has a stdout)
    const examples::BatchSplit batch_split = prepare_run(cfg);
    const TextData d = load_data(cfg, prompt_given);
    GPTConfig model_cfg = cfg.model;
    model_cfg.vocab = d.tokens.size();

    manual_seed(cfg.seed);
    const std::unique_ptr<LanguageModel> model_ptr = make_model(model_cfg);  // GPT or Llama (--arch)
    LanguageModel& model = *model_ptr;
    examples::check_same_run(same_on_all_ranks(cfg), d.fingerprint);  // ranks started alike, on the same text
    auto opt = make_adamw(model, cfg.lr, cfg.beta1, cfg.beta2, cfg.weight_decay);
    optim::CosineWithWarmup schedule(*opt, cfg.warmup, cfg.steps, cfg.min_lr);
    std::mt19937_64 batch_rng(cfg.seed);
    const RunFlags flags = run_flags(cfg);
    std::optional<distributed::ZeroRedundancyOptimizer> zero;  // --zero 1, 2: built before the load, which needs its owners
    if (cfg.zero > 0) zero.emplace(model, *opt, distributed::ZeroOptions().stage(cfg.zero));  // θ ← rank 0's θ
    auto load_optimizer = [&](const optim::OptimizerState& s) {
        if (zero) zero->load_state_dict(s);  // each rank keeps its own parameters' part
        else opt->load_state_dict(s);
    };
    const int start = restore(cfg, model, load_optimizer, schedule, batch_rng, flags, d.fingerprint);
    examples::check_same_start(start, batch_rng);
    std::optional<distributed::DistributedDataParallel> ddp;  // --zero 0
    if (!zero) ddp.emplace(model);                            // θ ← rank 0's θ, on every rank
    print_model(model);
    if (cfg.eval_only) return evaluate_only(cfg, model, d);
    if (rank0) print_graph_memory(model, d.split.val, batch_split.per_rank());
    if (rank0 && (d.tokens.is_bpe() || model_cfg.sparse_embedding))  // the k rows a batch looks up (report.hpp)
        fmt::print("{}", token_table_report(model, d.split.train, cfg.batch_size, batch_rng));

    // ---- the training loop: every rank draws the same B windows and takes the same step -----------
    std::optional<LossLog> log;  // rank 0's loss.csv
    if (rank0) log.emplace(cfg.out + "/loss.csv", /*resumed_at=*/start, d.tokens.is_bpe() ? "val_nats_per_char" : "");
    Progress progress(start, cfg.steps);
    const int end = cfg.stop_after > 0 ? std::min(cfg.steps, start + cfg.stop_after) : cfg.steps;
    examples::SyncTimer sync_timer;  // the all-reduce's share of the steps
    for (int step = start; step < end; ++step) {
        sync_timer.start_step();
        const double lr = *opt->param_groups()[0].lr;
        const Batch batch = sample_windows(d.split.train, cfg.batch_size, int(model_cfg.block), batch_rng);  // (B, T), (B, T)
        const double loss_sum = zero ? zero_step(model, *zero, batch, batch_split, cfg)
                                     : data_parallel_step(model, *opt, *ddp, batch, batch_split, cfg);
        if (zero) sync_timer.end_step(zero->last_step());
        else sync_timer.end_step(ddp->last_sync());
        const double train_loss = examples::mean_over_ranks(loss_sum);  // the B windows' mean CE, nats
        examples::check_finite_loss(step + 1, train_loss);
        schedule.step();
        log_step(cfg, model, d, step + 1, train_loss, lr, log, progress);
    }
    progress.finish();
    if (!sync_timer.line().empty()) fmt::print("{}\n", sync_timer.line());
    // Under ZeRO both are collective: the whole state gathered onto rank 0 (empty elsewhere), and
    // the memory table with every rank's share. Under DDP rank 0 copies its own state.
    const optim::OptimizerState optimizer_state = zero ? zero->state_dict() : rank0 ? opt->state_dict() : optim::OptimizerState{};
    const optim::MemoryReport memory = zero ? zero->memory_report() : opt->memory_report();
    if (!rank0) return 0;  // the rest is rank 0's: the files, the report, the samples, the pictures
    examples::FinalSaves saves;  // a failed save is reported, the other files are still written
    save(cfg, model, optimizer_state, end, batch_rng, flags, d, saves);
    saves.attempt(cfg.out + "/loss.csv", [&] {  // a row that could not be written, reported again here
        if (!log->failure().empty()) throw std::runtime_error(log->failure());
    });
    if (end < cfg.steps) {
        saves.check();
        fmt::print("stopped after step {} of {}; continue with --resume {}/checkpoint.safetensors\n", end, cfg.steps,
                   cfg.out);
        return 0;
    }
    print_results(cfg, model, d, memory, t0, start, prompt_given, saves);
    return 0;
}

// Lower bounds on the memory the flags ask for, against the machine's (check_flags).
static void check_memory_needs(const Config& c) {
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

// Every check that needs no data, so that a bad combination of flags is refused before the text
// is read. Throws std::invalid_argument naming the flags.
static void check_flags(const Config& c, bool vocab_size_given) {
    using examples::require;
    const GPTConfig& m = c.model;
    examples::split_batch(c.batch_size, c.grad_accum);  // throws unless W·N divides B
    require(c.warmup <= c.steps, fmt::format("--warmup {} is longer than --steps {}: pass --warmup {} or less", c.warmup, c.steps, c.steps));
    require(c.min_lr <= c.lr, fmt::format("--min-lr {} is above --lr {}", c.min_lr, c.lr));
    require(m.d % m.n_head == 0, fmt::format("--n-head {} does not divide --d {}: each head gets d/H dimensions",
                                             m.n_head, m.d));
    require(m.n_kv_head == 0 || m.n_head % m.n_kv_head == 0,
            fmt::format("--n-kv-head {} does not divide --n-head {}: each K/V head serves n_head / n_kv_head query heads",
                        m.n_kv_head, m.n_head));
    require(m.arch == "llama" || m.ffn_hidden == 0, "--ffn-hidden sets the SwiGLU width of --arch llama only");
    require(m.arch != "llama" || m.pos == "rope",
            fmt::format("--pos {}: --arch llama always uses rope positions", m.pos));
    require(m.pos != "rope" || (m.d / m.n_head) % 2 == 0,
            fmt::format("--pos rope needs an even head width, but --d {} / --n-head {} = {}", m.d, m.n_head, m.d / m.n_head));
    require(c.heatmap_layer < m.n_layer, fmt::format("--heatmap-layer {} is outside [-1, {}): the model has --n-layer {} "
                                                     "blocks (-1: the last)", c.heatmap_layer, m.n_layer, m.n_layer));
    require(c.heatmap_head < m.n_head, fmt::format("--heatmap-head {} is outside [0, {}): the model has --n-head {} heads",
                                                   c.heatmap_head, m.n_head, m.n_head));
    require(!c.eval_only || !c.resume.empty(), "--eval-only needs --resume CHECKPOINT");
    require(c.resume.empty() || c.init_from.empty(),
            "--resume continues a run exactly and --init-from starts a new one from its weights: pass one of them");
    require(c.tokenizer == "bpe" || !vocab_size_given,
            fmt::format("--vocab-size {} sets the number of byte-pair tokens: it needs --tokenizer bpe (--tokenizer "
                        "char takes the text's characters as they are)", c.vocab_size));
    require(!m.sparse_embedding || !m.tie,
            "--sparse-embedding needs --no-tie: the tied head would give every row of the token table a gradient");
    check_memory_needs(c);
}

int main(int argc, char** argv) {
    xgrad::distributed::InitGuard mpi(&argc, &argv);  // under mpirun: MPI; otherwise a world of 1
    examples::print_on_rank_0_only();
    using examples::int_flag;
    using examples::real_flag;
    const double inf = std::numeric_limits<double>::infinity();
    Config cfg;
    GPTConfig& m = cfg.model;
    CLI::App app{"Train a GPT (nanoGPT's shape) on the King James Bible, on characters or byte-pair tokens."};
    bool no_tie = false, no_bias = false;
    int_flag(app, "--n-layer", m.n_layer, 1, 256, "L, transformer blocks");
    int_flag(app, "--n-head", m.n_head, 1, 256, "H, attention heads per block (must divide --d)");
    int_flag(app, "--d", m.d, 1, 65536, "d, the model width (n_embd)");
    int_flag(app, "--block-size", m.block, 1, 65536, "T, tokens of context (characters with --tokenizer char)");
    app.add_option("--arch", m.arch, "the block: gpt2 (LayerNorm, GELU MLP, biases; nanoGPT's names) or llama (RMSNorm, SwiGLU, rope, no biases; Meta's names)")
        ->capture_default_str()->check(CLI::IsMember({"gpt2", "llama"}));
    int_flag(app, "--n-kv-head", m.n_kv_head, 0, 256, "K/V heads, dividing --n-head (grouped-query attention; 1: multi-query; 0: --n-head)");
    int_flag(app, "--ffn-hidden", m.ffn_hidden, 0, INT_MAX, "--arch llama: SwiGLU's hidden width (0: 8d/3 rounded up to a multiple of 64)");
    auto* pos = app.add_option("--pos", m.pos, "positions: learned (table wpe), sinusoidal (fixed), rope (rotary, in attention), none; --arch llama: rope")
        ->capture_default_str()->check(CLI::IsMember({"learned", "sinusoidal", "rope", "none"}));
    app.add_flag("--no-tie", no_tie, "give the head its own (V, d) weight instead of the token table (default: tied)");
    app.add_flag("--no-bias", no_bias, "no biases in the Linear and LayerNorm layers (default: biases on; --arch llama has none)");
    real_flag(app, "--dropout", m.dropout, {0, 1, false, true}, "dropout probability after the embeddings, in attention and after each residual branch");
    app.add_flag("--checkpoint-blocks", m.checkpoint_blocks, "run each block through xgrad::checkpoint: the graph keeps the blocks' inputs, backward runs each block again (the same losses; less memory, more time)");
    int_flag(app, "--steps", cfg.steps, 1, INT_MAX, "optimizer steps (iterations) in the whole run");
    int_flag(app, "--batch-size", cfg.batch_size, 1, INT_MAX, "B, windows of block-size + 1 characters per step, over all ranks (under mpirun -np W, a multiple of W × --grad-accum)");
    int_flag(app, "--grad-accum", cfg.grad_accum, 1, INT_MAX, "N, micro-steps per step: each rank takes B/(W·N) windows N times and adds up the gradients (the same step, less memory)");
    int_flag(app, "--zero", cfg.zero, 0, 2, "under mpirun: 0 every rank keeps all of AdamW's state (DistributedDataParallel); 1 each rank keeps the state of its own parameters only (ZeRO stage 1); 2 and only their reduced gradients (stage 2); the same steps and checkpoint");
    real_flag(app, "--lr", cfg.lr, {0, inf, true}, "peak learning rate of AdamW, reached after the warmup");
    real_flag(app, "--min-lr", cfg.min_lr, {0, inf}, "learning rate at the end of the cosine decay (at most --lr)");
    auto* warmup = int_flag(app, "--warmup", cfg.warmup, 0, INT_MAX, "steps of linear warmup from 0 to --lr (default: 100, or steps/10 if that is smaller); at most --steps");
    real_flag(app, "--beta1", cfg.beta1, {0, 1, false, true}, "AdamW β1");
    real_flag(app, "--beta2", cfg.beta2, {0, 1, false, true}, "AdamW β2");
    real_flag(app, "--weight-decay", cfg.weight_decay, {0, inf}, "AdamW decoupled weight decay λ on the ≥2-D weights (biases and LayerNorm: none)");
    real_flag(app, "--grad-clip", cfg.grad_clip, {0, inf}, "clip the global gradient L2 norm to this before each step (0: off)");
    examples::seed_flag(app, "--seed", cfg.seed, "seed of the initialisation, the batches and the samples");
    int_flag(app, "--threads", cfg.threads, 1, 256, "threads: xgrad's pool, matrix products included (OpenBLAS itself runs on 1); at most the idle cores");
    app.add_option("--data", cfg.data, "a text file to train on instead of the KJV (--tokenizer char: each byte is a token)");
    app.add_option("--tokenizer", cfg.tokenizer, "tokens: char (one byte each; V = the bytes that occur) or bpe (byte pairs learnt on the training text, text/tokenizer.hpp, saved as tokenizer.bpe beside the checkpoint)")
        ->capture_default_str()->check(CLI::IsMember({"char", "bpe"}));
    auto* vocab_size = int_flag(app, "--vocab-size", cfg.vocab_size, 256, INT_MAX, "--tokenizer bpe: V, the 256 byte tokens and V - 256 merges (at most what the training text's merges and the memory allow)");
    app.add_flag("--sparse-embedding", m.sparse_embedding, "with --no-tie: the token table's gradient holds only the rows a batch looks up, and AdamW updates only those (lazily, as PyTorch's SparseAdam)");
    examples::path_flag(app, "--out", cfg.out, "directory (created if missing) for loss.csv/png, attention.csv/png, checkpoint.safetensors, model.safetensors");
    examples::checkpoint_flag(app, "--resume", cfg.resume, "checkpoint.safetensors to continue from; the text and every flag but --threads, --grad-accum, --zero, --checkpoint-blocks, --out, --sample, --temperature, --top-k, --prompt, --kv-cache, --heatmap-*, --neighbours, --eval-every and --stop-after must match the saved run (at any number of ranks); --tokenizer bpe reads tokenizer.bpe beside it");
    examples::checkpoint_flag(app, "--init-from", cfg.init_from, "checkpoint.safetensors whose model weights start this run (nanoGPT's init_from): AdamW, the schedule and the batches start afresh at step 0, for --steps more; the model flags (--arch, --n-layer, --n-head, --n-kv-head, --d, --ffn-hidden, --block-size, --pos, --no-tie, --no-bias, --tokenizer, --vocab-size) and the vocabulary must match the saved run's; --tokenizer bpe reads tokenizer.bpe beside it");
    int_flag(app, "--stop-after", cfg.stop_after, 0, INT_MAX, "stop after this many steps of this run and save a checkpoint (0: run to the end)");
    app.add_flag("--eval-only", cfg.eval_only, "with --resume: print the validation loss on the fixed set and exit (bench/gpt_to_torch.py)");
    int_flag(app, "--eval-every", cfg.eval_every, 1, INT_MAX, "steps between validation losses");
    int_flag(app, "--eval-batches", cfg.eval_batches, 1, INT_MAX, "batches of --batch-size windows in the fixed validation set (evenly spaced over the split)");
    int_flag(app, "--sample", cfg.sample, 0, INT_MAX, "tokens to sample after training (characters with --tokenizer char; 0: none)");
    real_flag(app, "--temperature", cfg.temperature, {0, inf, true}, "sampling temperature: logits are divided by it");
    int_flag(app, "--top-k", cfg.top_k, 0, INT_MAX, "sample only among the k likeliest tokens (0: all)");
    std::string kv_cache = "on";
    app.add_option("--kv-cache", kv_cache, "sample through a KV cache (on) or rerun the whole context per character (off); the same characters")
        ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
    int_flag(app, "--heatmap-layer", cfg.heatmap_layer, -1, 255, "block whose attention attention.png shows (-1: the last; below --n-layer)");
    int_flag(app, "--heatmap-head", cfg.heatmap_head, 0, 255, "head whose attention attention.png shows (below --n-head)");
    int_flag(app, "--neighbours", cfg.neighbours, 0, 1000, "after training (and with --eval-only): the 5 nearest tokens, by cosine in the token table, of the N most frequent tokens of train (--tokenizer bpe: of 3 bytes or more; 0: none)");
    app.add_flag("--verbose", cfg.verbose,
                 "print the optimizer memory table of every parameter tensor, not only the 5 largest");
    auto* prompt = app.add_option("--prompt", cfg.prompt, "text the samples continue (--tokenizer char: its characters must be in the vocabulary)")->capture_default_str();
    return examples::parse_and_run(app, "gpt", argc, argv, [&] {
        m.tie = !no_tie;
        m.bias = !no_bias;
        cfg.kv_cache = kv_cache == "on";
        if (m.arch == "llama" && pos->count() == 0) m.pos = "rope";  // LLaMA's positions
        if (m.arch == "llama" && !no_bias) m.bias = false;          // and no biases
        if (warmup->count() == 0) cfg.warmup = std::min(cfg.warmup, cfg.steps / 10);
        check_flags(cfg, vocab_size->count() > 0);
        const int status = run(cfg, prompt->count() > 0);
        if (distributed::rank() == 0)  // the memory at its highest, whichever options made it
            fmt::print("peak RSS {:.1f} MiB (getrusage ru_maxrss: the most memory this process held at once)\n",
                       peak_rss_mib());
        return status;
    });
}
