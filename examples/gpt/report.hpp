// examples/gpt/report.hpp — what a GPT run shows: losses, the graph's memory, heatmaps, the
// nearest tokens (samples: generate.hpp).
//
// Legend: B batch, T time, V vocabulary, d width, H heads, L blocks.
// (The loss log, the progress line and the loss-curve plot are examples/common/run_log.hpp.)
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <xgrad/data/sampler.hpp>

#include "data.hpp"
#include "model.hpp"
#include "tokens.hpp"

namespace gpt {

// Mean over batches of the batch-mean cross-entropy (nats), no graph, in eval mode (no dropout;
// the mode is restored after). The fixed set: n_batches
// batches of `batch` windows at fixed_offsets(N, T, n_batches·batch), in order. The same set
// at every evaluation, and the one bench/gpt_to_torch.py evaluates in PyTorch.
double evaluate_fixed(LanguageModel& model, const Ids& data, int batch, int n_batches);
// The same mean over n_batches random batches (sample_windows with `rng`): nanoGPT's estimate_loss.
double evaluate_random(LanguageModel& model, const Ids& data, int batch, int n_batches, std::mt19937_64& rng);

// The loss of an evaluation per token and per character (tokens.hpp).
struct EvalLoss {
    double per_token = 0;  // nats/token: the mean over batches, exactly evaluate_fixed's figure
    double per_char = 0;   // nats/char: Σ token losses / Σ bytes of the target tokens
};
// evaluate_fixed and evaluate_random with both figures; byte_counts (V,) gives each token's bytes
// (Tokens::byte_counts).
EvalLoss evaluate_fixed(LanguageModel& model, const Ids& data, int batch, int n_batches,
                        const std::vector<std::int64_t>& byte_counts);
EvalLoss evaluate_random(LanguageModel& model, const Ids& data, int batch, int n_batches, std::mt19937_64& rng,
                         const std::vector<std::int64_t>& byte_counts);

// The memory a training step's graph holds between forward and backward. Walks the graph
// below `loss` (xgrad::visit_graph) and sums the bytes of every tensor it keeps alive, by the
// op that made it (parameters excluded: they are counted as parameters), and returns them as a
// table (op, tensors, bytes, KiB/MiB; each column as wide as its widest cell, largest first)
// followed by the parameter, gradient and AdamW-state bytes. `malloc_delta` (bytes, from glibc's
// mallinfo2 before and after the forward) counts everything the forward left allocated; the
// part the walk cannot see (arrays saved inside backward closures, the nodes themselves) is
// shown as the difference.
std::string graph_memory_report(const Tensor& loss, const LanguageModel& model, int batch, std::size_t malloc_delta);

// Bytes currently allocated by malloc in this process (glibc mallinfo2().uordblks).
std::size_t malloc_in_use();
// The token table's share of a step (printed for byte pairs and --sparse-embedding): k, the
// distinct ids a batch of `batch` windows looks up, counted on the next 10 batches of `sampler`, a
// copy (the run's own draws stay as they are), and the table's gradient per step, dense V·d·4 B
// or row-sparse k·(8 + d·4) B at the mean k.
std::string token_table_report(const LanguageModel& model, const Ids& train, int batch, data::WindowSampler sampler);

// The process's peak resident set size so far, MiB: getrusage(RUSAGE_SELF).ru_maxrss (Linux
// gives KiB), the most physical memory it held at once: data, parameters, graph, libraries.
double peak_rss_mib();

// Writes attention.csv (T × T weights of one head of one layer on the first ≤ block tokens of
// `text`, with io::write_file_atomically) and draws attention.png with gnuplot (rows: the query
// position, columns: the key position it reads, labelled with the tokens' text). Returns the note
// to print; throws std::runtime_error naming the file that cannot be written.
std::string plot_attention(LanguageModel& model, const Tokens& tokens, const std::string& text, std::int64_t layer,
                           std::int64_t head, const std::string& out_dir);

// ---- nearest tokens -------------------------------------------------------------------------------
// The n most frequent ids of `ids` among the tokens of at least min_bytes bytes, most frequent
// first (equal counts: the lower id first); fewer when fewer such tokens occur.
std::vector<std::int64_t> frequent_tokens(const Ids& ids, const Tokens& tokens, std::size_t n, std::size_t min_bytes);
// One line per query: the token, then its k nearest tokens by the cosine of their rows of the
// token table `table` (V, d), best first (examples/common/similarity.hpp), e.g.
//     ' LORD'     ' God' 0.61, ' Lord' 0.55, ...
std::string nearest_tokens(const Array& table, const Tokens& tokens, const std::vector<std::int64_t>& queries,
                           std::size_t k);

}  // namespace gpt
