// examples/gpt/data.cpp — vocabulary, split, windows, and the bigram baseline.
#include "data.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace gpt {

Vocab build_vocab(const std::string& text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    Vocab v;
    v.id.fill(-1);
    for (int c = 0; c < 256; ++c)
        if (seen[std::size_t(c)]) {
            v.id[std::size_t(c)] = std::int16_t(v.chars.size());
            v.chars.push_back(char(c));
        }
    return v;
}

Ids Vocab::encode(const std::string& text) const {
    Ids ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const std::int16_t k = id[static_cast<unsigned char>(text[i])];
        if (k < 0)
            throw std::runtime_error(fmt::format("encode: character {:?} (byte {}) at position {} is not in the "
                                                 "vocabulary of {} characters",
                                                 std::string(1, text[i]), int(static_cast<unsigned char>(text[i])), i,
                                                 chars.size()));
        ids[i] = k;
    }
    return ids;
}

std::string Vocab::decode(const Ids& ids) const {
    std::string s;
    for (std::int64_t i : ids) s.push_back(chars.at(std::size_t(i)));
    return s;
}

Split split_ids(const Ids& ids, int block, const std::string& source) {
    const std::size_t n = ids.size(), n_train = n * 9 / 10, window = std::size_t(block) + 1;
    if (n_train < window || n - n_train < window)
        throw std::runtime_error(fmt::format(
            "{}: the text has {} characters: train {} and validation {} (the last 10%), but each needs at least "
            "one window of block + 1 = {} characters; give a text of at least {} characters or a smaller "
            "--block-size",
            source, n, n_train, n - n_train, window, 10 * window));
    return {Ids(ids.begin(), ids.begin() + std::ptrdiff_t(n_train)), Ids(ids.begin() + std::ptrdiff_t(n_train), ids.end())};
}

Batch windows(const Ids& data, const std::vector<std::size_t>& offsets, int block) {
    const std::size_t B = offsets.size(), T = std::size_t(block);
    xgrad::IndexArray x(xgrad::ArrayShape{B, T}), y(xgrad::ArrayShape{B, T});
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t o = offsets[b];
        if (o + T + 1 > data.size())
            throw std::out_of_range(fmt::format("windows: offset {} + block {} + 1 exceeds the {} ids", o, T, data.size()));
        std::copy_n(data.begin() + std::ptrdiff_t(o), T, x.data() + b * T);      // x = data[o : o+T]
        std::copy_n(data.begin() + std::ptrdiff_t(o + 1), T, y.data() + b * T);  // y = data[o+1 : o+T+1]
    }
    return {xgrad::IndexTensor(std::move(x)), xgrad::IndexTensor(std::move(y))};
}

Batch sample_batch(const Ids& data, int batch, int block, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> pick(0, data.size() - std::size_t(block) - 1);
    std::vector<std::size_t> offsets(static_cast<std::size_t>(batch));
    for (auto& o : offsets) o = pick(rng);
    return windows(data, offsets, block);
}

std::vector<std::size_t> fixed_offsets(std::size_t n_data, int block, std::size_t n) {
    const std::size_t span = n_data - std::size_t(block) - 1;  // the last valid offset: o + T + 1 ≤ N
    std::vector<std::size_t> offsets(n);
    for (std::size_t j = 0; j < n; ++j) offsets[j] = j * span / n;
    return offsets;
}

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
