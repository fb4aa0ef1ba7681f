// examples/char_mlp/data.cpp — loading, splitting and windowing the word list.
#include "data.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unordered_set>

#include <xtensor/xadapt.hpp>

#include <fmt/format.h>

#include <xgrad/io/atomic_file.hpp>  // non_regular_kind

namespace char_mlp {

std::vector<std::string> load_words(const std::string& path) {
    const std::string kind = xgrad::io::non_regular_kind(path);  // a FIFO would block in open()
    if (!kind.empty()) throw std::runtime_error(fmt::format("{}: is {}, not a word list", path, kind));
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot open the word list (missing file?)", path));
    std::vector<std::string> words;
    std::unordered_set<std::string> seen;
    std::string line, first_rejected;
    std::size_t lineno = 0, first_rejected_line = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::string w;
        bool ok = !line.empty();
        for (unsigned char c : line) {
            const char l = char(std::tolower(c));
            ok = ok && l >= 'a' && l <= 'z';
            w.push_back(l);
        }
        if (!ok) {
            if (first_rejected_line == 0) first_rejected_line = lineno, first_rejected = line;
            continue;
        }
        if (seen.insert(w).second) words.push_back(w);
    }
    if (lineno == 0) throw std::runtime_error(fmt::format("{}: the file is empty", path));
    if (words.empty())
        throw std::runtime_error(fmt::format(
            "{}: no usable word in {} lines (a word must be letters a-z only; line {} is '{}')", path,
            lineno, first_rejected_line, first_rejected));
    return words;
}

Split split_words(std::vector<std::string> words, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::shuffle(words.begin(), words.end(), rng);
    const std::size_t n = words.size(), n_train = n * 8 / 10, n_val = n / 10;
    Split s;
    s.train.assign(words.begin(), words.begin() + n_train);
    s.val.assign(words.begin() + n_train, words.begin() + n_train + n_val);
    s.test.assign(words.begin() + n_train + n_val, words.end());
    return s;
}

Examples make_examples(const std::vector<std::string>& words, int block) {
    // Count first, then write straight into X and Y: building growing std::vectors and copying
    // them over would hold up to three copies of the 20 MiB of windows at once, the peak of
    // the whole run's memory (bench/, W6).
    std::size_t n = 0;
    for (const auto& w : words) n += w.size() + 1;
    const std::size_t b = std::size_t(block);
    xgrad::IndexArray X(std::vector<std::size_t>{n, b}), Y(std::vector<std::size_t>{n});
    std::int64_t* x = X.data();
    std::int64_t* y = Y.data();
    for (const auto& w : words) {
        std::vector<std::int64_t> context(b, 0);  // "..." at the start
        for (std::size_t i = 0; i <= w.size(); ++i) {
            const std::int64_t next = i < w.size() ? w[i] - 'a' + 1 : 0;  // then the closing '.'
            x = std::copy(context.begin(), context.end(), x);
            *y++ = next;
            context.erase(context.begin());
            context.push_back(next);
        }
    }
    return {xgrad::IndexTensor(std::move(X)), xgrad::IndexTensor(std::move(Y))};
}

static Batch gather(const Examples& data, const std::vector<std::size_t>& rows) {
    const std::size_t block = data.X.shape()[1];
    xgrad::IndexArray x(std::vector<std::size_t>{rows.size(), block}), y(std::vector<std::size_t>{rows.size()});
    for (std::size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(data.X.data().data() + rows[i] * block, block, x.data() + i * block);
        y.data()[i] = data.Y.data().data()[rows[i]];
    }
    return {xgrad::IndexTensor(std::move(x)), xgrad::IndexTensor(std::move(y))};
}

Batch sample_batch(const Examples& data, std::size_t batch, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> pick(0, data.size() - 1);
    std::vector<std::size_t> rows(batch);
    for (auto& r : rows) r = pick(rng);
    return gather(data, rows);
}

Batch slice(const Examples& data, std::size_t begin, std::size_t end) {
    std::vector<std::size_t> rows;
    for (std::size_t r = begin; r < end; ++r) rows.push_back(r);
    return gather(data, rows);
}

double bigram_nll(const std::vector<std::string>& train, const std::vector<std::string>& eval) {
    std::vector<double> counts(kVocab * kVocab, 1.0);  // add-one smoothing
    auto each_pair = [](const std::string& w, auto&& f) {
        int prev = 0;
        for (char c : w) f(prev, c - 'a' + 1), prev = c - 'a' + 1;
        f(prev, 0);
    };
    for (const auto& w : train) each_pair(w, [&](int a, int b) { counts[a * kVocab + b] += 1; });
    std::vector<double> row_total(kVocab, 0.0);
    for (int a = 0; a < kVocab; ++a)
        for (int b = 0; b < kVocab; ++b) row_total[a] += counts[a * kVocab + b];
    double nll = 0;
    std::size_t n = 0;
    for (const auto& w : eval)
        each_pair(w, [&](int a, int b) { nll -= std::log(counts[a * kVocab + b] / row_total[a]), ++n; });
    return n ? nll / double(n) : 0.0;
}

}  // namespace char_mlp
