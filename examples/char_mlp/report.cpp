// examples/char_mlp/report.cpp — evaluation, sampling, embedding neighbours, logs and plots.
#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <xtensor/xadapt.hpp>

#include "common/gnuplot.hpp"

namespace char_mlp {

double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double evaluate(const CharMLP& model, const Examples& data) {
    NoGradGuard no_grad;
    const std::size_t chunk = 8192;
    double total = 0;
    for (std::size_t begin = 0; begin < data.size(); begin += chunk) {
        const std::size_t end = std::min(begin + chunk, data.size());
        Batch b = slice(data, begin, end);
        const nn::functional::CrossEntropyOptions sum_over_rows{nn::Reduction::Sum};
        total += nn::functional::cross_entropy(model.forward(b.x), b.y, sum_over_rows).item();
    }
    return total / double(data.size());
}

std::string sample_word(const CharMLP& model, int block, std::mt19937_64& rng) {
    NoGradGuard no_grad;
    std::vector<std::int64_t> context(std::size_t(block), 0);
    std::string word;
    while (word.size() < 40) {
        IndexArray x = xt::adapt(context, std::vector<std::size_t>{1, std::size_t(block)});
        Tensor probs = softmax(model.forward(IndexTensor(x)), -1);  // (1, V)
        std::discrete_distribution<int> next(probs.data().begin(), probs.data().end());
        const int id = next(rng);
        if (id == 0) break;
        word.push_back(id_to_char(id));
        context.erase(context.begin());
        context.push_back(id);
    }
    return word;
}

void print_neighbours(const CharMLP& model, const std::string& letters, int k) {
    const Array& E = model.emb->weight.data();  // (V, d)
    const std::size_t V = E.shape()[0], d = E.shape()[1];
    auto cos = [&](std::size_t a, std::size_t b) {
        double dot = 0, na = 0, nb = 0;
        for (std::size_t j = 0; j < d; ++j) {
            dot += E(a, j) * E(b, j);
            na += E(a, j) * E(a, j);
            nb += E(b, j) * E(b, j);
        }
        return dot / std::sqrt(na * nb);
    };
    for (char c : letters) {
        const std::size_t a = std::size_t(c - 'a' + 1);
        std::vector<std::pair<double, std::size_t>> sims;
        for (std::size_t b = 0; b < V; ++b)
            if (b != a) sims.emplace_back(cos(a, b), b);
        std::sort(sims.rbegin(), sims.rend());
        std::string line = fmt::format("  {} :", c);
        for (int i = 0; i < k; ++i) line += fmt::format("  {} {:+.2f}", id_to_char(std::int64_t(sims[i].second)), sims[i].first);
        fmt::print("{}\n", line);
    }
    const std::string vowels = "aeiou";
    double within = 0, across = 0;
    int n_within = 0, n_across = 0;
    for (char a = 'a'; a <= 'z'; ++a)
        for (char b = char(a + 1); b <= 'z'; ++b) {
            const bool va = vowels.find(a) != std::string::npos, vb = vowels.find(b) != std::string::npos;
            const double s = cos(std::size_t(a - 'a' + 1), std::size_t(b - 'a' + 1));
            if (va && vb) within += s, ++n_within;
            else if (va != vb) across += s, ++n_across;
        }
    fmt::print("  mean cosine vowel–vowel {:+.3f}  vs  vowel–consonant {:+.3f}  ({})\n", within / n_within,
               across / n_across, within / n_within > across / n_across ? "the vowels cluster" : "no vowel cluster");
}

LossLog::LossLog(const std::string& path, bool append) {
    const bool continuing = append && std::filesystem::exists(path);  // else start a fresh file
    out_.open(path, continuing ? std::ios::app : std::ios::trunc);
    if (!out_) throw std::runtime_error(fmt::format("{}: cannot open for writing", path));
    if (!continuing) out_ << "step,train_loss,val_loss,lr\n";
}

void LossLog::write(int step, double train_loss, double val_loss, double lr) {
    out_ << fmt::format("{},{:.6f},{},{:.6g}\n", step, train_loss,
                        std::isnan(val_loss) ? std::string() : fmt::format("{:.6f}", val_loss), lr);
    out_.flush();
}

std::string plot_losses(const std::string& dir, const std::string& title, const std::string& yrange) {
    std::ostringstream gp;
    gp << "set terminal pngcairo size 900,540 noenhanced\n"
       << "set output '" << dir << "/loss.png'\n"
       << "set datafile separator ','\n"
       << "set title '" << title << "'\n"
       << "set xlabel 'step'\nset ylabel 'loss (nats)'\nset grid\nset key top right\n"
       << "set yrange " << yrange << "\n"
       << "plot '" << dir << "/loss.csv' using 1:2 every ::1 with lines lc rgb '#c8d6ea' title 'train (minibatch)', \\\n"
       << "     '' using 1:2 every ::1 smooth bezier lw 2 lc rgb '#2c5d9f' title 'train (smoothed)', \\\n"
       << "     '' using 1:($3 > 0 ? $3 : 1/0) every ::1 with linespoints lw 2 lc rgb '#c0392b' title 'validation'\n";
    return examples::run_gnuplot(dir + "/loss.gp", gp.str(), dir + "/loss.png", "loss curve");
}

Progress::Progress(int first, int total) : first_(first), total_(total), tty_(::isatty(STDOUT_FILENO)), start_(now_seconds()) {}

void Progress::update(int step, double loss, double lr, double val_loss) {
    if (!std::isnan(val_loss)) last_val_ = val_loss;
    const double elapsed = now_seconds() - start_;
    const double rate = (step - first_) / std::max(elapsed, 1e-9);
    const double eta = (total_ - step) / std::max(rate, 1e-9);
    // On a terminal the line stays and shows the latest validation loss; in a log, only the
    // lines of an evaluation show one.
    const bool show_val = tty_ ? last_val_ >= 0 : !std::isnan(val_loss);
    const std::string val = show_val ? fmt::format("  val {:.4f}", last_val_) : "";
    const std::string line = fmt::format("step {:>6}/{}  loss {:.4f} nats  lr {:.2e}  {:>6.{}f} steps/s  ETA {:>4.0f} s{}",
                                         step, total_, loss, lr, rate, rate < 100 ? 2 : 0, eta, val);  // slow runs: 2 decimals
    if (tty_) fmt::print("\r{:<100}", line), std::fflush(stdout);
    else fmt::print("{}\n", line);
}

void Progress::finish() {
    if (tty_) fmt::print("\n");
}

}  // namespace char_mlp
