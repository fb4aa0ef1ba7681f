// examples/char_mlp/report.cpp — evaluation, sampling and embedding neighbours of a CharMLP
// (the loss log, progress line and loss curve are examples/common/run_log).
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <xtensor/xadapt.hpp>

namespace char_mlp {

double evaluate(const CharMLP& model, const Examples& data) {
    NoGradGuard no_grad;
    const std::size_t chunk = 8192;
    double total = 0;
    for (std::size_t begin = 0; begin < data.size(); begin += chunk) {
        const std::size_t end = std::min(begin + chunk, data.size());
        Batch b = slice(data, begin, end);
        const auto sum_over_rows = nn::functional::CrossEntropyOptions().reduction(nn::Reduction::Sum);
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
    const Array& E = model.emb->weight.mutable_data();  // (V, d)
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

}  // namespace char_mlp
