// examples/gpt/data.cpp — the bigram baseline.
#include "data.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace gpt {

BigramLoss bigram_loss(const Ids& train, const Ids& eval, std::int64_t vocab,
                       const std::vector<std::int64_t>& byte_counts) {
    // The counts c(a, b) of the pairs that occur, by key a·V + b, and each row's total c(a) = Σ_b c(a, b):
    // a table of V² counts would take 512 MiB at V = 8,192. P(b | a) = (c(a, b) + 1) / (c(a) + V).
    const std::uint64_t V = std::uint64_t(vocab);
    std::unordered_map<std::uint64_t, double> counts;
    std::vector<double> row_total(V, 0.0);
    for (std::size_t i = 0; i + 1 < train.size(); ++i) {
        counts[std::uint64_t(train[i]) * V + std::uint64_t(train[i + 1])] += 1;
        row_total[std::size_t(train[i])] += 1;
    }
    double nll = 0, bytes = 0;
    for (std::size_t i = 0; i + 1 < eval.size(); ++i) {
        const std::uint64_t a = std::uint64_t(eval[i]), b = std::uint64_t(eval[i + 1]);
        const auto it = counts.find(a * V + b);
        const double c = it == counts.end() ? 0.0 : it->second;
        nll -= std::log((c + 1) / (row_total[a] + double(V)));
        bytes += byte_counts.empty() ? 1.0 : double(byte_counts.at(b));
    }
    const double pairs = double(eval.size() > 1 ? eval.size() - 1 : 0);
    return {pairs > 0 ? nll / pairs : 0.0, pairs > 0 ? nll / bytes : 0.0};
}

double bigram_nll(const Ids& train, const Ids& eval, std::int64_t vocab) {
    return bigram_loss(train, eval, vocab).per_token;
}

}  // namespace gpt
