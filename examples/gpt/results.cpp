// examples/gpt/results.cpp — what a run prints (results.hpp).
#include "results.hpp"

#include <algorithm>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xgrad/io/atomic_file.hpp>
#include <xgrad/nn/generate.hpp>
#include <xgrad/nn/lora.hpp>  // the token table's adapter
#include <xgrad/text/render.hpp>

#include "generate.hpp"
#include "report.hpp"

namespace gpt {

namespace {

double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// attention.csv/png: one head's weights on Genesis 1:1, or (a character vocabulary without
// those characters) on the start of val. Returns the note to print.
std::string draw_heatmap(const Config& cfg, LanguageModel& model, const TextData& d) {
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
void print_neighbours(const Config& cfg, const LanguageModel& model, const TextData& d) {
    const std::size_t min_bytes = d.tokens.is_bpe() ? 3 : 1;
    const std::vector<std::int64_t> queries = frequent_tokens(d.split.train, d.tokens, std::size_t(cfg.neighbours), min_bytes);
    const nn::Embedding& wte = model.token_embedding();
    // The table the model looks up: with an adapter, E + s·(B·A)ᵀ (nn/lora.hpp), not the frozen E.
    const nn::LoRAEmbedding* adapter = wte.lora();
    const Array table = adapter && adapter->enabled() ? adapter->merged_weight() : wte.weight.data();
    fmt::print("\nnearest tokens by cosine in the token table {}{}, for the {} most frequent tokens{} of train:\n{}",
               shape_str(wte.weight.shape()), adapter ? " with its adapter merged" : "", queries.size(),
               min_bytes > 1 ? " of 3 bytes or more" : "", nearest_tokens(table, d.tokens, queries, 5));
}

// The graph's memory, once, on the first fixed validation windows (no rng drawn). A rank's graph
// holds one micro-batch of b = B/(W·N) windows at a time.
void print_graph_memory(LanguageModel& model, const Ids& val, int b) {
    const int T = int(model.config().block);
    const Batch w = windows(val, fixed_offsets(val.size(), T, std::size_t(b)), T);
    const std::size_t before = malloc_in_use();
    Tensor loss = nn::functional::cross_entropy(model.forward(w.x), w.y);
    fmt::print("{}", graph_memory_report(loss, model, b, malloc_in_use() - before));
}

// The final losses against the bigram baseline, and the wall time since t0. Byte pairs: per token
// and per character (tokens.hpp), the baseline too.
void print_losses(const Config& cfg, LanguageModel& model, const TextData& d, double t0, int start) {
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
void print_optimizer_memory(const optim::MemoryReport& memory, bool verbose) {
    fmt::print("\noptimizer memory after training ({})\n",
               verbose ? std::string("every tensor")
                       : fmt::format("the 5 largest of {} tensors; --verbose for all", memory.rows.size()));
    if (verbose) std::cout << memory << "\n";
    else fmt::print("{}\n", optim::memory_summary(memory, 5));
}

// --sample tokens after the prompt (generate.hpp), and what the KV cache held. The terminal gets
// the text as text::render_text shows it (control characters as \uXXXX, ill-formed UTF-8 as
// U+FFFD), sample.txt the bytes as sampled.
void print_samples(const Config& cfg, LanguageModel& model, const TextData& d, examples::FinalSaves& saves) {
    std::string prompt = cfg.prompt;
    if (!cfg.prompt_given && !d.tokens.is_bpe()) {  // the default prompt, in a text that lacks its characters
        const bool ok = std::all_of(prompt.begin(), prompt.end(),
                                    [&](char ch) { return d.tokens.vocab().id[static_cast<unsigned char>(ch)] >= 0; });
        if (!ok) prompt = d.tokens.decode(Ids(d.split.val.begin(), d.split.val.begin() + 1));
    }
    const std::string unit = d.tokens.is_bpe() ? "tokens" : "characters";
    std::mt19937_64 sample_rng(cfg.seed);
    const bool kv_cache = cfg.kv_cache == "on";
    const auto gen = nn::GenerationOptions().max_new_tokens(cfg.sample).temperature(cfg.temperature).top_k(cfg.top_k)
                         .top_p(cfg.top_p).use_cache(kv_cache);
    nn::GenerationStats stats;
    const double t_sample = examples::now_seconds();
    const std::string text_out = sample_text(model, d.tokens, prompt, gen, sample_rng, &stats);
    const double seconds = examples::now_seconds() - t_sample;
    // The prompt and the sample as one text, so that a character the sample completes is kept whole.
    const std::string sampled = prompt + text_out, shown = text::render_text(sampled);
    const std::string path = cfg.out + "/sample.txt";
    fmt::print("\n{} sampled {} (temperature {}, top-k {}{}{}) after the prompt:\n{}\n", cfg.sample, unit,
               cfg.temperature, cfg.top_k == 0 ? std::string("off") : std::to_string(cfg.top_k),
               cfg.top_p < 1 ? fmt::format(", top-p {}", cfg.top_p) : "",
               shown == sampled ? "" : fmt::format("; control characters as \\uXXXX, the bytes in {}", path), shown);
    saves.attempt(path, [&] { io::write_file_atomically(path, sampled, "gpt"); });
    fmt::print("\nsampling  {:.1f} {}/s, KV cache {}: {} positions run through the model for {} {}", cfg.sample / seconds,
               unit, cfg.kv_cache, stats.positions_run, cfg.sample, unit);
    if (kv_cache) {
        const std::size_t layer = stats.cache_bytes.empty() ? 0 : stats.cache_bytes.front();
        fmt::print(" ({} rebuilt past the block)\nKV cache  {} layers × {} = {}: {} bytes per position "
                   "(2 · L · K/V heads · hd · 4 B) × block {}",
                   stats.rebuilds, stats.cache_bytes.size(), optim::human_bytes(layer),
                   optim::human_bytes(layer * stats.cache_bytes.size()), model.kv_cache_bytes_per_token(),
                   model.config().block);
    }
    fmt::print("\n");
}

}  // namespace

void print_model(const LanguageModel& model) {
    const GPTConfig& m = model.config();
    const std::string kv_heads = m.n_kv_head == 0 ? "" : fmt::format(" (K/V heads {})", m.n_kv_head);
    fmt::print("model  {}: L {}, H {}{}, d {}, block {}, pos {}, head {}: {} parameters{}\n",
               m.arch == "llama" ? "LLaMA" : "GPT", m.n_layer, m.n_head, kv_heads, m.d, m.block, m.pos,
               m.tie ? (m.arch == "llama" ? "tied to tok_embeddings" : "tied to wte") : "untied", model.num_parameters(),
               m.tie ? " (the tied table counted once)" : "");
}

void print_start(const Config& cfg, LanguageModel& model, const TextData& d, int b, const data::WindowSampler& sampler) {
    print_graph_memory(model, d.split.val, b);
    if (d.tokens.is_bpe() || model.config().sparse_embedding)  // the k rows a batch looks up (report.hpp)
        fmt::print("{}", token_table_report(model, d.split.train, cfg.batch_size, sampler));
}

void log_step(const Config& cfg, LanguageModel& model, const TextData& d, int step, double train_loss, double lr,
              std::optional<examples::LossLog>& log, examples::Progress& progress) {
    const bool eval = step % cfg.eval_every == 0 || step == cfg.steps;
    const EvalLoss val = eval ? evaluate_fixed(model, d.split.val, cfg.batch_size, cfg.eval_batches, d.tokens.byte_counts())
                              : EvalLoss{nan(), nan()};
    if (eval) examples::check_finite_loss(step, val.per_token, "validation");
    const double per_char = d.tokens.is_bpe() ? val.per_char : nan();
    if (log && (step % 10 == 0 || eval)) log->write(step, train_loss, val.per_token, lr, per_char);
    if (step % 10 == 0 || eval) progress.update(step, train_loss, lr, val.per_token, per_char);
}

int evaluate_only(const Config& cfg, LanguageModel& model, const TextData& d) {
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

void print_results(const Config& cfg, LanguageModel& model, const TextData& d, const optim::MemoryReport& memory,
                   double t0, int start, examples::FinalSaves& saves) {
    print_losses(cfg, model, d, t0, start);
    print_optimizer_memory(memory, cfg.verbose);
    if (cfg.sample > 0) print_samples(cfg, model, d, saves);
    if (cfg.neighbours > 0) print_neighbours(cfg, model, d);
    if (saves.all_written()) {
        std::vector<std::string> files{"loss.csv", "checkpoint.safetensors"};
        if (cfg.lora_rank == 0 || cfg.merge_lora) files.push_back("model.safetensors");
        if (cfg.lora_rank > 0) files.push_back("adapter/");
        if (d.tokens.is_bpe()) files.push_back("tokenizer.bpe");
        if (cfg.sample > 0) files.push_back("sample.txt");
        for (std::string& f : files) f = cfg.out + "/" + f;
        const std::string last = files.back();
        files.pop_back();
        fmt::print("\nwrote {} and {}\n", fmt::join(files, ", "), last);
    }
    // One row per 10 steps: an EMA of weight 0.9 averages about the last 10 rows, 100 steps.
    saves.attempt(cfg.out + "/loss.png", [&] {
        fmt::print("{}\n", examples::plot_losses(cfg.out, "gpt: cross-entropy loss (nats)", "[1.0:4.5]", 0.9));
    });
    saves.attempt(cfg.out + "/attention.png", [&] { fmt::print("{}\n", draw_heatmap(cfg, model, d)); });
    saves.check();  // a failed save: exit status 1, naming what was written and what not
}

}  // namespace gpt
