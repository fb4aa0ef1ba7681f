// examples/gpt/main.cpp — train a GPT on the King James Bible, on characters or byte-pair tokens.
//
// nanoGPT's shakespeare_char CPU run, on the KJV: characters are tokens (V = 73), the first 90%
// of the text trains, the last 10% validates (--tokenizer bpe: byte pairs, tokens.hpp). The model
// (model.hpp; --arch llama: llama.hpp) is L 4 blocks of 4-head causal self-attention and an MLP at
// width d 128, reading 64 tokens; AdamW (lr 1e-3, betas 0.9/0.99, weight decay 0.1 on the 2-D
// weights) with 100 warmup steps and a cosine decay to 1e-4, gradients clipped at norm 1, 2,000
// steps of 12 windows. Then the losses against a bigram baseline, samples (nn::generate, through
// a KV cache), the loss curve and one head's attention (results.hpp).
// The flags are one table (config.cpp); what happens before and after the loop is setup.hpp.
//
// Run:  build/examples/gpt                 (the defaults; minutes on one core)
//       build/examples/gpt --help          (every flag, with units and defaults)
//       mpirun -np 2 build/examples/gpt    (2 processes, each on its rows of every batch; README.md)
// Writes to --out: loss.csv, loss.png, attention.png, checkpoint.safetensors (for --resume and
// --init-from), model.safetensors (nanoGPT's names) and, for byte pairs, tokenizer.bpe.
// Fine-tuning: --init-from a base and --lora-rank r train LoRA adapters alone (lora.hpp), saved
// in --out/adapter; --merge-lora writes model.safetensors with them merged.
// --profile N: steps 6..5+N through xgrad's profiler, then its table, trace.json and profile.png
// (common/profile.hpp). Under mpirun rank 0 alone prints and writes; --zero 1 or 2 shards AdamW's
// state over the ranks.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <xgrad/core/profiler.hpp>
#include <xgrad/data/sampler.hpp>
#include <xgrad/distributed/ddp.hpp>
#include <xgrad/distributed/zero.hpp>

#include "common/cli.hpp"            // parse_and_run
#include "common/data_parallel.hpp"  // the ranks' agreement, the loss over the ranks
#include "common/profile.hpp"        // --profile N: a window of steps through the profiler
#include "config.hpp"                // Config, the flag table
#include "report.hpp"                // peak_rss_mib
#include "results.hpp"               // what the run prints
#include "setup.hpp"                 // output files, data, restore, save

using namespace xgrad;
using namespace gpt;

static double data_parallel_step(LanguageModel& model, optim::Optimizer& opt, distributed::DistributedDataParallel& ddp,
                                 const std::vector<data::Batch>& micro, const Config& cfg);
static double zero_step(LanguageModel& model, distributed::ZeroRedundancyOptimizer& zero,
                        const std::vector<data::Batch>& micro, const Config& cfg);

// ---- the run, as nanoGPT's train.py: data, model, optimizer, the loop, save, report --------------
static int run(const Config& cfg, const examples::FlagTable& flags, std::optional<double>& training_peak_mib) {
    const double t0 = examples::now_seconds();
    const bool rank0 = distributed::rank() == 0;  // rank 0 alone writes files (and alone has a stdout)
    const examples::BatchSplit split = prepare_run(cfg);
    const TextData d = load_data(cfg);  // tokens; train and val ids

    GPTConfig model_cfg = cfg.model;
    model_cfg.vocab = d.tokens.size();
    manual_seed(cfg.seed);
    const std::unique_ptr<LanguageModel> model_ptr = make_model(model_cfg);  // GPT or Llama (--arch)
    LanguageModel& model = *model_ptr;
    examples::check_same_run(flags.values(examples::kRanks), d.fingerprint);  // ranks started alike
    load_weights(cfg, flags, model, d);  // --init-from's base; --lora-rank: frozen, adapters beside it (lora.hpp)
    auto opt = make_adamw(model, cfg.lr, cfg.beta1, cfg.beta2, cfg.weight_decay);  // the trainable parameters
    optim::CosineWithWarmup schedule(*opt, cfg.warmup, cfg.steps, cfg.min_lr);
    data::WindowSampler sampler(d.split.train, sampler_options(cfg, split));  // this rank's windows
    std::optional<distributed::ZeroRedundancyOptimizer> zero;  // --zero 1, 2: before the load, which needs its owners
    if (cfg.zero > 0) zero.emplace(model, *opt, distributed::ZeroOptions().stage(cfg.zero));  // θ ← rank 0's θ
    auto load_optimizer = [&](const optim::OptimizerState& s) {
        if (zero) zero->load_state_dict(s);  // each rank keeps its own parameters' part
        else opt->load_state_dict(s);
    };
    const int start = restore(cfg, flags, model, load_optimizer, schedule, sampler, d);
    examples::check_same_start(start, sampler.state_dict());
    std::optional<distributed::DistributedDataParallel> ddp;  // --zero 0
    if (!zero) ddp.emplace(model);                            // θ ← rank 0's θ, on every rank
    print_model(model);
    if (cfg.eval_only) return evaluate_only(cfg, model, d);
    if (rank0) print_start(cfg, model, d, split.per_rank(), sampler);

    // ---- the training loop: every rank draws the same B windows, takes its rows, and the same step --
    std::optional<examples::LossLog> log;  // rank 0's loss.csv
    if (rank0) log.emplace(cfg.out + "/loss.csv", /*resumed_at=*/start, d.tokens.is_bpe() ? "val_nats_per_char" : "");
    examples::Progress progress(start, cfg.steps);
    const int end = cfg.stop_after > 0 ? std::min(cfg.steps, start + cfg.stop_after) : cfg.steps;
    examples::SyncTimer sync_timer;  // the all-reduce's share of the steps
    const bool stops_early = cfg.stop_after > 0 && start + cfg.stop_after < cfg.steps;
    examples::StepProfile profile(cfg.profile, start, end, cfg.out, stops_early ? "--stop-after" : "--steps");
    for (int step = start; step < end; ++step) {
        profile.begin_step(step);  // --profile N: steps start + 6 .. start + 5 + N (1-based)
        sync_timer.start_step();
        const double lr = *opt->param_groups()[0].lr;
        const std::vector<data::Batch> micro = sampler.next();  // --grad-accum micro-batches x, y (b, T)
        const double loss_sum = zero ? zero_step(model, *zero, micro, cfg) : data_parallel_step(model, *opt, *ddp, micro, cfg);
        if (zero) sync_timer.end_step(zero->last_step());
        else sync_timer.end_step(ddp->last_sync());
        const double train_loss = examples::mean_over_ranks(loss_sum);  // the B windows' mean CE, nats
        examples::check_finite_loss(step + 1, train_loss);
        schedule.step();
        profile.end_step(step);  // after the window's last step: the table, trace.json, profile.png
        log_step(cfg, model, d, step + 1, train_loss, lr, log, progress);
    }
    progress.finish();
    if (!sync_timer.line().empty()) fmt::print("{}\n", sync_timer.line());
    training_peak_mib = peak_rss_mib();  // the steps' peak, before anything is saved

    // ---- save and report: AdamW's whole state (ZeRO: gathered onto rank 0, collective) ------------
    std::optional<optim::OptimizerState> gathered;  // one process: none, the file is written from AdamW's own buffers
    if (zero) gathered = zero->state_dict();
    const optim::MemoryReport memory = zero ? zero->memory_report() : opt->memory_report();
    if (!rank0) return 0;
    examples::FinalSaves saves;  // a failed save is reported, the other files are still written
    save(cfg, flags, model, gathered ? train::TrainingState(model, *gathered) : train::TrainingState(model, *opt), end,
         sampler, d, saves);
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
    print_results(cfg, model, d, memory, t0, start, saves);
    return 0;
}

int main(int argc, char** argv) {
    distributed::InitGuard mpi(&argc, &argv);  // under mpirun: MPI; otherwise a world of 1
    examples::print_on_rank_0_only();
    Config cfg;
    CLI::App app{"Train a GPT (nanoGPT's shape) on the King James Bible, on characters or byte-pair tokens."};
    examples::FlagTable flags(app);
    add_flags(flags, cfg);  // config.cpp: one row a flag
    return examples::parse_and_run(app, "gpt", argc, argv, [&] {
        finish_flags(flags, cfg);
        std::optional<double> training_peak_mib;
        const int status = run(cfg, flags, training_peak_mib);
        // The memory at its highest, whichever options made it, and the training's share of it.
        const std::string training =
            training_peak_mib ? fmt::format("; {:.1f} MiB by the last step", *training_peak_mib) : "";
        if (distributed::rank() == 0)
            fmt::print("peak RSS {:.1f} MiB (getrusage ru_maxrss: the most memory this process held at once){}\n",
                       peak_rss_mib(), training);
        return status;
    });
}

// ---- one optimizer step --------------------------------------------------------------------------
// The forwards and backwards of one step: micro-step k runs this rank's b windows and adds
// ∇(CE_k / N) to the gradients. Returns Σ_k CE_k / N, this rank's mean over its N·b windows (nats).
// The profiler's regions (free when none runs) mark the step's phases in the trace; the
// optimizer's step and zero_grad and the collectives record themselves.
static double accumulate_gradients(LanguageModel& model, const std::vector<data::Batch>& micro) {
    double loss_sum = 0;
    for (const data::Batch& mb : micro) {  // (b, T), (b, T)
        Tensor loss;
        {
            const profiler::RecordFunction scope("forward + loss");
            loss = nn::functional::cross_entropy(model.forward(mb.x), mb.y) / real(micro.size());  // ()
        }
        {
            const profiler::RecordFunction scope("loss.backward()");
            loss.backward();  // the gradients add up over the micro-steps
        }
        loss_sum += loss.item();
    }
    return loss_sum;
}

// clip_gradients in a region of the optimizer's kind (it runs no op of its own).
static void clip(LanguageModel& model, double max_norm) {
    const profiler::RecordFunction scope("clip_grad_norm_", profiler::Kind::optimizer);
    clip_gradients(model, max_norm);
}

// DDP averages the W ranks' gradient sums, so every rank holds ∇ of the mean loss over the B
// windows and takes the same step. Returns accumulate_gradients' loss.
static double data_parallel_step(LanguageModel& model, optim::Optimizer& opt, distributed::DistributedDataParallel& ddp,
                                 const std::vector<data::Batch>& micro, const Config& cfg) {
    opt.zero_grad();
    const double loss_sum = accumulate_gradients(model, micro);
    {
        const profiler::RecordFunction scope("ddp.sync_gradients()", profiler::Kind::collective);
        ddp.sync_gradients();  // ∇ ← the mean of the W ranks' ∇
    }
    clip(model, cfg.grad_clip);
    opt.step();
    return loss_sum;
}

// The same step under ZeRO (--zero 1, 2): each rank receives the mean gradient of its own
// parameters only, clips with the whole model's norm, steps its own parameters, and receives the
// others' updated ones. The same numbers as data_parallel_step (distributed/zero.hpp).
static double zero_step(LanguageModel& model, distributed::ZeroRedundancyOptimizer& zero,
                        const std::vector<data::Batch>& micro, const Config& cfg) {
    zero.zero_grad();
    const double loss_sum = accumulate_gradients(model, micro);
    {
        const profiler::RecordFunction scope("zero.reduce_scatter_gradients()", profiler::Kind::collective);
        zero.reduce_scatter_gradients();  // this rank's parameters: ∇ ← the mean of the W ranks' ∇
    }
    {
        const profiler::RecordFunction scope("clip_grad_norm_", profiler::Kind::optimizer);
        zero.clip_grad_norm_(cfg.grad_clip > 0 ? cfg.grad_clip : std::numeric_limits<double>::infinity());  // 0: off
    }
    zero.step();  // AdamW on this rank's parameters, then the all-gather of every rank's
    return loss_sum;
}
