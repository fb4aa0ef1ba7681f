// examples/char_mlp/main.cpp — train a character-level MLP language model on a word list.
//
// The model of Bengio et al. (2003), as in Karpathy's makemore: read the previous
// `block_size` characters of a word, embed each as a d-vector, concatenate, one tanh hidden
// layer, and predict the next character (27 classes: '.' and a–z). Trained with AdamW under a
// cosine learning-rate schedule on the system word list, then compared with a bigram counting
// baseline, sampled, and its learned character embeddings inspected.
//
// Run:  build/examples/char_mlp                   (defaults: about 30k steps)
//       build/examples/char_mlp --help            (every flag, with units and defaults)
//       mpirun -np 2 build/examples/char_mlp      (2 processes, each on its half of every batch)
// Writes to --out: loss.csv, loss.png (if gnuplot is installed), checkpoint.safetensors.
// --profile N: steps 6..5+N through xgrad's profiler, then its table, trace.json and profile.png
// (common/profile.hpp).
// Under mpirun every rank trains the same model on its slice of each batch (common/data_parallel.hpp)
// and rank 0 alone prints and writes.
#include <climits>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/checkpoint.hpp"  // save/load of model + optimizer + sampler state
#include "common/cli.hpp"         // up-front checks, parse_and_run
#include "common/flags.hpp"       // the flags as one table
#include "common/data_parallel.hpp"  // the batch rule of W ranks × --grad-accum, rank 0's stdout
#include "common/outputs.hpp"     // --out's files checked up front, saved one by one
#include "common/profile.hpp"     // --profile N: a window of steps through the profiler
#include "common/run_log.hpp"     // LossLog, Progress, plot_losses, now_seconds
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/distributed/ddp.hpp>
#include "data.hpp"
#include "model.hpp"
#include <xgrad/optim/optim.hpp>
#include "report.hpp"

using namespace xgrad;
using namespace char_mlp;
using namespace examples;

struct Config {
    int steps = 30000;          // optimizer steps in the whole run
    int batch_size = 128;       // B, examples per step, over all ranks
    int grad_accum = 1;         // N, micro-steps per step, each of B/(W·N) examples per rank
    double lr = 3e-3;           // peak learning rate (after warmup)
    double weight_decay = 0.0;  // AdamW's decoupled decay λ
    int warmup = 500;           // steps of linear warmup (capped at steps/10 unless given)
    int block_size = 5;         // characters of context
    int embed_dim = 24;         // d, the width of a character's vector
    int hidden = 256;           // tanh units
    std::uint64_t seed = 42;    // data split, initialisation, batches and samples
    int threads = 1;            // xgrad threads (set_num_threads, core/threads.hpp)
    std::string data = "/usr/share/dict/words";
    std::string out = "out/char_mlp";
    std::string resume;         // checkpoint to continue from
    int sample = 20;            // words to sample at the end
    int eval_every = 2000;      // steps between validation losses
    int stop_after = 0;         // stop after this many steps of this run (0: run to the end)
    int profile = 0;            // steps profiled after the warm-up (common/profile.hpp); 0: none
};

static double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// ---- the steps of a run, in the order run() takes them ------------------------------------------

// The output directory, where rank 0 will write every file below (each checked now, so that a
// path in the way stops the run before its first step), and, on several ranks or micro-steps,
// how a batch is split over them (common/data_parallel.hpp).
static BatchSplit prepare_run(const Config& cfg) {
    set_num_threads(cfg.threads);
    const BatchSplit batch_split = split_batch(cfg.batch_size, cfg.grad_accum);
    if (batch_split.world > 1 || batch_split.accum > 1)
        fmt::print("{}\n", world_line(batch_split, cfg.threads, "examples"));
    std::error_code ec;
    if (distributed::rank() == 0) std::filesystem::create_directories(cfg.out, ec);
    if (ec) throw std::runtime_error(fmt::format("--out {}: cannot create the directory ({})", cfg.out, ec.message()));
    std::vector<std::string> files{"loss.csv", "loss_ema.csv", "loss.gp", "loss.png", "checkpoint.safetensors"};
    if (cfg.profile > 0)
        for (const std::string& name : profile_files()) files.push_back(name);
    if (distributed::rank() == 0) check_output_files(cfg.out, files);
    return batch_split;
}

// The words split 80/10/10, their (block → next char) examples, and the fingerprint of the list.
struct WordData {
    Split words;
    Examples train, val, test;
    train::TextFingerprint fingerprint;  // what the ids mean (id 0 '.', ids 1-26 'a'-'z') and which words were read
};

static WordData load_data(const Config& cfg) {
    const std::vector<std::string> all_words = load_words(cfg.data);
    if (all_words.size() < 10)
        throw std::runtime_error(fmt::format("{}: {} usable words; the 80/10/10 split needs at least 10", cfg.data,
                                             all_words.size()));
    WordData d;
    d.words = split_words(all_words, cfg.seed);
    // A resume on another list is refused (common/checkpoint.hpp).
    std::string vocab;
    for (std::int64_t id = 0; id < kVocab; ++id) vocab.push_back(id_to_char(id));
    std::string text;
    for (const std::string& w : all_words) text += w + '\n';
    d.fingerprint = train::fingerprint(vocab, text);
    d.train = make_examples(d.words.train, cfg.block_size);
    d.val = make_examples(d.words.val, cfg.block_size);
    d.test = make_examples(d.words.test, cfg.block_size);
    fmt::print("data   {}: {} words → train {} / val {} / test {} words\n", cfg.data, all_words.size(),
               d.words.train.size(), d.words.val.size(), d.words.test.size());
    fmt::print("       examples (block {} → next char): train {} / val {} / test {}\n", cfg.block_size,
               d.train.size(), d.val.size(), d.test.size());
    return d;
}

// --resume: the model, AdamW's moments, the step and the batch sampler as saved, the schedule at
// that step. Returns the step to start from (0 without --resume).
static int restore(const Config& cfg, CharMLP& model, optim::AdamW& opt, optim::CosineWithWarmup& schedule,
                   std::mt19937_64& batch_rng, const RunFlags& flags, const train::TextFingerprint& data) {
    if (cfg.resume.empty()) return 0;
    const int start = load_checkpoint(cfg.resume, model, opt, batch_rng, flags, data);
    schedule.set_step(start);
    fmt::print("resume {} at step {}\n", cfg.resume, start);
    return start;
}

// One step's gradients on the B examples of `batch`: micro-step k takes this rank's b of them
// (common/data_parallel.hpp) and adds ∇(CE_k / N) to the gradients; DDP averages the W ranks'
// sums, so every rank holds ∇ of the mean loss over the B examples. Returns Σ_k CE_k / N, this
// rank's mean over its N·b examples (nats). The profiler's regions (free when none runs) mark the
// step's phases in the trace; the optimizer and the collectives record themselves.
static double accumulate_gradients(CharMLP& model, optim::AdamW& opt, distributed::DistributedDataParallel& ddp,
                                   const Batch& batch, const BatchSplit& batch_split, int grad_accum) {
    opt.zero_grad();
    double loss_sum = 0;
    for (int k = 0; k < grad_accum; ++k) {
        const Batch mb = micro_batch(batch, batch_split, k);          // x (b, block), y (b,)
        Tensor loss;
        {
            const profiler::RecordFunction scope("forward + loss");
            Tensor logits = model.forward(mb.x);                      // (b, V)
            loss = nn::functional::cross_entropy(logits, mb.y) / real(grad_accum);  // () nats
        }
        {
            const profiler::RecordFunction scope("loss.backward()");
            loss.backward();  // the gradients add up over the micro-steps
        }
        loss_sum += loss.item();
    }
    const profiler::RecordFunction scope("ddp.sync_gradients()", profiler::Kind::collective);
    ddp.sync_gradients();  // ∇ ← the mean of the W ranks' ∇
    return loss_sum;
}

// After step `step` (1-based): the validation loss every --eval-every steps and at the last
// (every rank evaluates: the same weights give the same value, so a divergence stops all), a row
// of loss.csv (rank 0's) every 10 steps and the progress line every 100.
static void log_step(const Config& cfg, CharMLP& model, const Examples& val, int step, double train_loss, double lr,
                     std::optional<LossLog>& log, Progress& progress) {
    const bool eval = step % cfg.eval_every == 0 || step == cfg.steps;
    const double val_loss = eval ? evaluate(model, val) : nan();
    if (eval) check_finite_loss(step, val_loss, "validation");
    if (log && (step % 10 == 0 || eval)) log->write(step, train_loss, val_loss, lr);
    if (step % 100 == 0 || eval) progress.update(step, train_loss, lr, val_loss);
}

// The final losses against the bigram baseline, the wall time since t0 and AdamW's memory.
static void print_losses(CharMLP& model, const WordData& d, const optim::AdamW& opt, double t0, int start) {
    fmt::print("\nloss (nats)      train {:.4f}   val {:.4f}   test {:.4f}\n", evaluate(model, d.train),
               evaluate(model, d.val), evaluate(model, d.test));
    fmt::print("bigram baseline  train {:.4f}   val {:.4f}   test {:.4f}   (add-one smoothed counts)\n",
               bigram_nll(d.words.train, d.words.train), bigram_nll(d.words.train, d.words.val),
               bigram_nll(d.words.train, d.words.test));
    fmt::print("wall time        {:.1f} s{}\n", now_seconds() - t0, start > 0 ? " (this process, since the resume)" : "");
    std::cout << "\noptimizer memory after training (AdamW keeps exp_avg and exp_avg_sq: 8 bytes per parameter)\n"
              << opt.memory_report() << "\n";
}

// --sample words, ten to a line, and each of a few letters' nearest letters in the embedding.
static void print_samples(const Config& cfg, const CharMLP& model) {
    if (cfg.sample > 0) fmt::print("\n{} sampled words:\n", cfg.sample);
    std::mt19937_64 sample_rng(cfg.seed);
    for (int i = 0; i < cfg.sample; ++i)
        fmt::print("{}{}", sample_word(model, cfg.block_size, sample_rng), i % 10 == 9 || i + 1 == cfg.sample ? "\n" : "  ");
    fmt::print("\nnearest letters by cosine similarity of their learned embeddings:\n");
    print_neighbours(model, "aeioubdstz", 4);
}

// ---- the run: data, model, loop, save, then the reports -----------------------------------------
static int run(const Config& cfg, const FlagTable& table) {
    const double t0 = now_seconds();
    manual_seed(cfg.seed);
    const bool rank0 = distributed::rank() == 0;  // rank 0 alone writes files (and alone has a stdout)
    const BatchSplit batch_split = prepare_run(cfg);
    const WordData d = load_data(cfg);

    CharMLP model(kVocab, cfg.block_size, cfg.embed_dim, cfg.hidden);
    check_same_run(table.values(kRanks), d.fingerprint);  // ranks started alike, on the same list
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(cfg.lr).weight_decay(cfg.weight_decay));
    optim::CosineWithWarmup schedule(opt, cfg.warmup, cfg.steps, /*min_lr=*/cfg.lr / 20);
    std::mt19937_64 batch_rng(cfg.seed);
    const RunFlags flags = table.values(kResume);  // recorded in the checkpoint; --resume repeats them
    const int start = restore(cfg, model, opt, schedule, batch_rng, flags, d.fingerprint);
    check_same_start(start, batch_rng);
    distributed::DistributedDataParallel ddp(model);  // θ ← rank 0's θ, on every rank
    fmt::print("model  Embedding({}, {}) → Linear({}, {}) → tanh → Linear({}, {}): {} parameters\n", kVocab,
               cfg.embed_dim, cfg.block_size * cfg.embed_dim, cfg.hidden, cfg.hidden, kVocab,
               model.num_parameters());
    std::cout << opt.memory_report() << "\n";

    // ---- the training loop: every rank draws the same B examples and takes the same step ----------
    std::optional<LossLog> log;  // rank 0's loss.csv; a resumed run continues the file
    if (rank0) log.emplace(cfg.out + "/loss.csv", /*resumed_at=*/start);
    Progress progress(start, cfg.steps);
    const int end = cfg.stop_after > 0 ? std::min(cfg.steps, start + cfg.stop_after) : cfg.steps;
    SyncTimer sync_timer;  // the all-reduce's share of the steps
    const bool stops_early = cfg.stop_after > 0 && start + cfg.stop_after < cfg.steps;
    StepProfile profile(cfg.profile, start, end, cfg.out, stops_early ? "--stop-after" : "--steps");
    for (int step = start; step < end; ++step) {
        profile.begin_step(step);  // --profile N: steps start + 6 .. start + 5 + N (1-based)
        sync_timer.start_step();
        const Batch batch = sample_batch(d.train, std::size_t(cfg.batch_size), batch_rng);  // x (B, block), y (B,)
        const double loss_sum = accumulate_gradients(model, opt, ddp, batch, batch_split, cfg.grad_accum);
        const double train_loss = mean_over_ranks(loss_sum);  // the B examples' mean CE, nats
        check_finite_loss(step + 1, train_loss);             // before the step: the weights stay finite
        const double lr = *opt.param_groups()[0].lr;
        opt.step();
        sync_timer.end_step(ddp.last_sync());
        schedule.step();
        profile.end_step(step);  // after the window's last step: the table, trace.json, profile.png
        log_step(cfg, model, d.val, step + 1, train_loss, lr, log, progress);
    }
    progress.finish();
    if (!sync_timer.line().empty()) fmt::print("{}\n", sync_timer.line());
    if (!rank0) return 0;  // the rest is rank 0's: the checkpoint, the report, the samples
    FinalSaves saves;  // a failed save is reported, the loss curve is still drawn
    saves.attempt(cfg.out + "/checkpoint.safetensors",
                  [&] { save_checkpoint(cfg.out + "/checkpoint.safetensors", model, opt, end, batch_rng, flags, d.fingerprint); });
    saves.attempt(cfg.out + "/loss.csv", [&] {  // a row that could not be written, reported again here
        log->flush();
        if (!log->failure().empty()) throw std::runtime_error(log->failure());
    });
    if (end < cfg.steps) {
        saves.check();
        fmt::print("stopped after step {} of {}; continue with --resume {}/checkpoint.safetensors\n", end, cfg.steps,
                   cfg.out);
        return 0;
    }

    // ---- results -------------------------------------------------------------------------------------
    print_losses(model, d, opt, t0, start);
    print_samples(cfg, model);
    if (saves.all_written()) fmt::print("\nwrote {0}/loss.csv and {0}/checkpoint.safetensors\n", cfg.out);
    saves.attempt(cfg.out + "/loss.png", [&] { fmt::print("{}\n", plot_losses(cfg.out)); });
    saves.check();  // a failed save: exit status 1, naming it
    return 0;
}

// Every check that needs no data. Throws std::invalid_argument naming the flags.
static void check_flags(const Config& c) {
    const BatchSplit split = split_batch(c.batch_size, c.grad_accum);  // W·N divides B
    examples::require(c.warmup <= c.steps, fmt::format("--warmup {} is longer than --steps {}: pass --warmup {} or less", c.warmup, c.steps, c.steps));
    const bool stops_early = c.stop_after > 0 && c.stop_after < c.steps;
    check_profile_window(c.profile, 0, stops_early ? c.stop_after : c.steps, stops_early ? "--stop-after" : "--steps");
    // Lower bounds in bytes: the parameters (the embedding table, the two Linear layers), each
    // with its gradient and AdamW's two moments; the step's whole batch, which every rank draws
    // (B row numbers, x (B, block) and y (B,) of int64 ids); the (b, block·d) input of the hidden
    // layer and its (b, hidden) output, for one micro-batch of b = B/(W·N) examples. All in
    // doubles: B·(T + 2)·8 and the like may not fit in 64 bits.
    const double V = kVocab, d = c.embed_dim, T = c.block_size, H = c.hidden, B = split.per_rank();
    const double bytes = sizeof(real), B_all = c.batch_size;
    const MemoryNeed weights{"parameters V·d + T·d·H + H·V, with gradients and AdamW's two moments",
                             4 * (V * d + T * d * H + H * V) * bytes};
    const MemoryNeed batch{"the step's batch: B rows, x (B, block) and y (B,) of int64 ids", B_all * (T + 2) * 8};
    examples::check_memory({weights, batch}, fmt::format("--batch-size {} or --block-size {}", c.batch_size, c.block_size));
    examples::check_memory({weights, batch, {"the activations b·(T·d + H) of one micro-step (b = B/(ranks·N))", B * (T * d + H) * bytes}},
                           fmt::format("--batch-size {} (or raise --grad-accum), --block-size {}, --embed-dim {} or --hidden {}",
                                       c.batch_size, c.block_size, c.embed_dim, c.hidden));
}

// The flags, one row each (common/flags.hpp): kResume for those that shape the loss trajectory (a
// checkpoint records them, and --resume must repeat them), kRanks for what every rank must agree on.
static void add_flags(FlagTable& t, Config& cfg) {
    const double inf = std::numeric_limits<double>::infinity();
    t.integer("--steps", cfg.steps, 1, INT_MAX, "optimizer steps in the whole run", kResume);
    t.integer("--batch-size", cfg.batch_size, 1, INT_MAX, "B, examples per step, over all ranks (under mpirun -np W, a multiple of W × --grad-accum)", kResume);
    t.integer("--grad-accum", cfg.grad_accum, 1, INT_MAX, "N, micro-steps per step: each rank takes B/(W·N) examples N times and adds up the gradients (the same step, less memory)", kRanks);
    t.real("--lr", cfg.lr, {0, inf, true}, "peak learning rate of AdamW; cosine decay to lr/20 after the warmup", kResume);
    t.real("--weight-decay", cfg.weight_decay, {0, inf}, "AdamW decoupled weight decay λ", kResume);
    t.integer("--warmup", cfg.warmup, 0, INT_MAX, "steps of linear learning-rate warmup (default: 500, or steps/10 if that is smaller); at most --steps", kResume);
    t.integer("--block-size", cfg.block_size, 1, 64, "characters of context the model reads", kResume);
    t.integer("--embed-dim", cfg.embed_dim, 1, 4096, "width d of each character's embedding vector", kResume);
    t.integer("--hidden", cfg.hidden, 1, 65536, "tanh units in the hidden layer", kResume);
    t.seed("--seed", cfg.seed, "seed of the data split, initialisation, batches and samples", kResume);
    t.integer("--threads", cfg.threads, 1, 256, "threads: xgrad's pool, matrix products included (OpenBLAS itself runs on 1); at most the cores");
    t.text("--data", cfg.data, "word list, one word per line (words with letters other than a-z are skipped)", kResume);
    t.path("--out", cfg.out, "directory (created if missing) for loss.csv, loss.png, loss.gp and checkpoint.safetensors (and --profile's trace.json, profile.png)");
    t.integer("--sample", cfg.sample, 0, INT_MAX, "number of words to sample at the end");
    t.integer("--eval-every", cfg.eval_every, 1, INT_MAX, "steps between validation losses");
    t.integer("--stop-after", cfg.stop_after, 0, INT_MAX, "stop after this many steps of this run and save a checkpoint (0: run to the end)", kRanks);
    t.integer("--profile", cfg.profile, 0, 1000, "profile N steps after the run's first 5 (warm-up) with xgrad's profiler: print the table of ops by self time and the time per step by category, write trace.json (Perfetto, chrome://tracing) and profile.png (time by category; live bytes, the peak marked) in --out (0: off)");
    t.checkpoint("--resume", cfg.resume, "checkpoint.safetensors to continue from; the word list and every flag but " +
                 t.names_without(kResume) + " must match the saved run (at any number of ranks)");
}

int main(int argc, char** argv) {
    xgrad::distributed::InitGuard mpi(&argc, &argv);  // under mpirun: MPI; otherwise a world of 1
    examples::print_on_rank_0_only();
    Config cfg;
    CLI::App app{"Train a character-level MLP language model (Bengio et al. 2003) on a word list."};
    FlagTable table(app);
    add_flags(table, cfg);
    return examples::parse_and_run(app, "char_mlp", argc, argv, [&] {
        if (!table.given("--warmup")) cfg.warmup = std::min(cfg.warmup, cfg.steps / 10);
        check_flags(cfg);
        return run(cfg, table);
    });
}
