// examples/gpt/report.cpp — evaluation, the graph-memory report, the attention heatmap, the nearest tokens.
#include "report.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "common/gnuplot.hpp"
#include "common/similarity.hpp"  // unit_rows, nearest
#include <xgrad/io/atomic_file.hpp>
#include <xgrad/nn/lora.hpp>  // count_parameters
#include <xgrad/optim/optimizer.hpp>

namespace gpt {

namespace F = nn::functional;

EvalLoss evaluate_fixed(LanguageModel& model, const Ids& data, int batch, int n_batches,
                        const std::vector<std::int64_t>& byte_counts) {
    NoGradGuard no_grad;
    EvalMode eval_mode(model);  // no dropout
    const int T = int(model.config().block);
    const std::vector<std::size_t> offsets = fixed_offsets(data.size(), T, std::size_t(batch) * std::size_t(n_batches));
    double total = 0;
    LossSum sum;
    for (int b = 0; b < n_batches; ++b) {
        const std::vector<std::size_t> rows(offsets.begin() + b * batch, offsets.begin() + (b + 1) * batch);
        Batch w = windows(data, rows, T);
        const double loss = F::cross_entropy(model.forward(w.x), w.y).item();
        total += loss;
        sum.add(loss, w.y, byte_counts);
    }
    return {total / n_batches, sum.per_char()};
}

EvalLoss evaluate_random(LanguageModel& model, const Ids& data, int batch, int n_batches, std::mt19937_64& rng,
                         const std::vector<std::int64_t>& byte_counts) {
    NoGradGuard no_grad;
    EvalMode eval_mode(model);  // no dropout
    double total = 0;
    LossSum sum;
    for (int b = 0; b < n_batches; ++b) {
        Batch w = sample_windows(data, batch, int(model.config().block), rng);
        const double loss = F::cross_entropy(model.forward(w.x), w.y).item();
        total += loss;
        sum.add(loss, w.y, byte_counts);
    }
    return {total / n_batches, sum.per_char()};
}

double evaluate_fixed(LanguageModel& model, const Ids& data, int batch, int n_batches) {
    return evaluate_fixed(model, data, batch, n_batches, {}).per_token;
}

double evaluate_random(LanguageModel& model, const Ids& data, int batch, int n_batches, std::mt19937_64& rng) {
    return evaluate_random(model, data, batch, n_batches, rng, {}).per_token;
}

std::size_t malloc_in_use() { return mallinfo2().uordblks; }

double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return double(usage.ru_maxrss) / 1024.0;  // KiB → MiB
}

std::string graph_memory_report(const Tensor& loss, const LanguageModel& model, int batch, std::size_t malloc_delta) {
    struct Kind {
        std::size_t tensors = 0, bytes = 0;
    };
    std::map<std::string, Kind> kinds;
    std::size_t total = 0;
    visit_graph(loss, [&](const TensorImpl& t) {
        if (!t.grad_fn && t.requires_grad) return;  // a parameter: counted below as a parameter
        const std::size_t bytes = t.data.size() * sizeof(real);
        Kind& k = kinds[t.grad_fn ? t.grad_fn->name : std::string("(inputs without grad)")];
        ++k.tensors, k.bytes += bytes, total += bytes;
    });
    std::vector<std::pair<std::string, Kind>> rows(kinds.begin(), kinds.end());
    std::stable_sort(rows.begin(), rows.end(),  // largest first; equal sizes stay in name order
                     [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });

    const std::size_t hidden = malloc_delta > total ? malloc_delta - total : 0;
    // Cells as strings first, so each column is as wide as its widest cell (op names vary with --pos).
    struct Line {
        std::string name, tensors, bytes, human, note;
    };
    std::vector<Line> lines{{"tensor made by op", "tensors", "bytes", "", ""}};
    for (const auto& [name, k] : rows)
        lines.push_back({name, std::to_string(k.tensors), std::to_string(k.bytes), optim::human_bytes(k.bytes), ""});
    lines.push_back({"total (tensors)", "", std::to_string(total), optim::human_bytes(total), ""});
    lines.push_back({"+ inside closures, nodes", "", std::to_string(hidden), optim::human_bytes(hidden),
                     fmt::format("   (malloc in use after forward − before: {})", optim::human_bytes(malloc_delta))});
    std::size_t w_name = 0, w_tensors = 0, w_bytes = 0, w_human = 0;
    for (const Line& l : lines) {
        w_name = std::max(w_name, l.name.size());
        w_tensors = std::max(w_tensors, l.tensors.size());
        w_bytes = std::max(w_bytes, l.bytes.size());
        w_human = std::max(w_human, l.human.size());
    }
    const auto& c = model.config();
    std::string out = fmt::format(
        "graph memory after the first forward (B {}, T {}: what the graph keeps alive for backward)\n", batch, c.block);
    for (const Line& l : lines) {
        const std::string row = fmt::format("  {:<{}}  {:>{}}  {:>{}}  {:>{}}{}", l.name, w_name, l.tensors, w_tensors,
                                            l.bytes, w_bytes, l.human, w_human, l.note);
        out += row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
    }
    const std::size_t params = model.num_parameters() * sizeof(real);
    // Gradients and AdamW's moments for the trainable parameters alone (LoRA: the adapters).
    const nn::ParameterCounts counts = nn::count_parameters(model);
    const std::size_t trained = counts.frozen == 0 ? params : counts.trainable * sizeof(real);
    const std::string grads = c.sparse_embedding ? " at most (the row-sparse token table's: below)" : "";
    const std::string frozen = counts.frozen == 0 ? "" : fmt::format(", for the {} trainable parameters alone", counts.trainable);
    return out + fmt::format("  beside: parameters {}, gradients {}{}, AdamW state {} (exp_avg + exp_avg_sq){}; the graph "
                             "is {:.1f}x the parameters\n",
                             optim::human_bytes(params), optim::human_bytes(trained), grads, optim::human_bytes(2 * trained),
                             frozen, double(std::max(malloc_delta, total)) / double(params));
}

std::string token_table_report(const LanguageModel& model, const Ids& train, int batch, data::WindowSampler sampler) {
    const GPTConfig& m = model.config();
    std::size_t lo = SIZE_MAX, hi = 0, sum = 0;
    const int n = 10;
    for (int i = 0; i < n; ++i) {
        const Batch b = windows(train, sampler.next_offsets(), int(m.block));  // x (B, T): the ids the table looks up
        std::vector<std::int64_t> ids(b.x.data().begin(), b.x.data().end());
        std::sort(ids.begin(), ids.end());
        const std::size_t k = std::size_t(std::unique(ids.begin(), ids.end()) - ids.begin());
        lo = std::min(lo, k), hi = std::max(hi, k), sum += k;
    }
    const double k = double(sum) / n, V = double(m.vocab), row = double(m.d * std::int64_t(sizeof(real)));
    const std::size_t dense = std::size_t(V * row), sparse = std::size_t(k * (8 + row));
    std::string out = fmt::format("token table ({}, {}): a batch of {} × {} looks up k = {:.0f} distinct rows on "
                                  "average ({} to {} over the next {} batches), {:.1f}% of V\n",
                                  m.vocab, m.d, batch, m.block, k, lo, hi, n, 100 * k / V);
    if (m.sparse_embedding)
        out += fmt::format("  its gradient per step: {} row-sparse (k·(8 + d·4) B at the mean k) instead of {} dense "
                           "(V·d·4 B); AdamW updates those k rows only\n",
                           optim::human_bytes(sparse), optim::human_bytes(dense));
    else
        out += fmt::format("  its gradient per step: {} dense (V·d·4 B); row-sparse (--no-tie --sparse-embedding) it "
                           "would be {} (k·(8 + d·4) B at the mean k)\n",
                           optim::human_bytes(dense), optim::human_bytes(sparse));
    return out;
}

// A token's text as a gnuplot tic label in a double-quoted string: a space as ·, a newline as \n.
static std::string tic_label(const std::string& token) {
    std::string label;
    for (char c : token) {
        if (c == ' ') label += "·";
        else if (c == '\n') label += "\\\\n";
        else if (c == '"' || c == '\\') label += std::string("\\") + c;
        else label += c;
    }
    return label;
}

std::string plot_attention(LanguageModel& model, const Tokens& tokens, const std::string& text, std::int64_t layer,
                           std::int64_t head, const std::string& dir) {
    check(head >= 0 && head < model.config().n_head, "plot_attention", "head {} is outside [0, {})", head,
          model.config().n_head);
    const std::size_t block = std::size_t(model.config().block);
    Ids ids = tokens.encode(tokens.is_bpe() ? text : text.substr(0, block));  // characters: the first ≤ block
    ids.resize(std::min(ids.size(), block));                                   // the first ≤ block tokens
    IndexArray x(ArrayShape{1, ids.size()});
    std::copy(ids.begin(), ids.end(), x.data());
    EvalMode eval_mode(model);  // the weights without the embeddings' dropout
    const Tensor w = model.attention_weights(IndexTensor(std::move(x)), layer);  // (1, H, T, T)
    const std::size_t T = ids.size();
    const real* a = w.data().data() + std::size_t(head) * T * T;                 // head `head`, (T, T)
    std::string csv;  // {:g}: 6 significant digits, as std::ostream prints a number
    for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j)
            fmt::format_to(std::back_inserter(csv), "{:g}{}", a[i * T + j], j + 1 < T ? "," : "\n");
    xgrad::io::write_file_atomically(dir + "/attention.csv", csv, "plot_attention");
    std::string tics;
    for (std::size_t i = 0; i < T; ++i) tics += fmt::format("{}\"{}\" {}", i ? ", " : "", tic_label(tokens.bytes(ids[i])), i);
    std::ostringstream gp;
    gp << "set terminal pngcairo size 900,860 noenhanced font ',9'\n"
       << "set output " << examples::gnuplot_quote(dir + "/attention.png") << "\n"
       << "set datafile separator ','\n"
       << fmt::format("set title 'attention weights, layer {} head {}: row = query position, column = key it reads'\n",
                      layer, head)
       << "set xtics (" << tics << ") font ',8'\nset ytics (" << tics << ") font ',8'\n"
       << fmt::format("set xrange [-0.5:{0}]\nset yrange [{0}:-0.5]\n", double(T) - 0.5)
       << "set palette defined (0 'white', 0.25 '#9ecae1', 1 '#08306b')\nset cbrange [0:1]\nset size square\n"
       << "plot " << examples::gnuplot_quote(dir + "/attention.csv") << " matrix with image notitle\n";
    return examples::run_gnuplot(dir + "/attention.gp", gp.str(), dir + "/attention.png", "attention heatmap");
}

std::vector<std::int64_t> frequent_tokens(const Ids& ids, const Tokens& tokens, std::size_t n, std::size_t min_bytes) {
    std::vector<std::int64_t> count(std::size_t(tokens.size()), 0);
    for (std::int64_t id : ids) ++count.at(std::size_t(id));
    std::vector<std::int64_t> order;
    for (std::int64_t id = 0; id < tokens.size(); ++id)
        if (count[std::size_t(id)] > 0 && tokens.bytes(id).size() >= min_bytes) order.push_back(id);
    std::stable_sort(order.begin(), order.end(),  // most frequent first; equal counts keep the id order
                     [&](std::int64_t a, std::int64_t b) { return count[std::size_t(a)] > count[std::size_t(b)]; });
    order.resize(std::min(order.size(), n));
    return order;
}

// A token's bytes between quotes, printable: a newline as \n, another control or non-ASCII byte as \xNN.
static std::string token_text(const std::string& bytes) {
    std::string out = "'";
    for (unsigned char c : bytes) {
        if (c == '\n') out += "\\n";
        else if (c >= 0x20 && c < 0x7f) out += char(c);
        else out += fmt::format("\\x{:02x}", c);
    }
    return out + "'";
}

std::string nearest_tokens(const Array& table, const Tokens& tokens, const std::vector<std::int64_t>& queries,
                           std::size_t k) {
    const Array unit = examples::unit_rows(table);  // each row / its length: a dot product is a cosine
    std::size_t width = 0;
    for (std::int64_t q : queries) width = std::max(width, token_text(tokens.bytes(q)).size());
    std::string out;
    for (std::int64_t q : queries) {
        std::string line = fmt::format("  {:<{}}", token_text(tokens.bytes(q)), width);
        const auto near = examples::nearest(unit, q, k);
        for (std::size_t i = 0; i < near.size(); ++i)
            line += fmt::format("{} {} {:.2f}", i ? "," : "  ", token_text(tokens.bytes(near[i].first)), near[i].second);
        out += line + "\n";
    }
    return out;
}

}  // namespace gpt
