// examples/word2vec/corpus.cpp — tokenizer, vocabulary, subsampling, pairs, negative sampler.
// The formulas are stated beside their declarations in corpus.hpp.
#include "corpus.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <xtensor/xbuilder.hpp>

#include <xgrad/data/text_source.hpp>

namespace word2vec {

using xgrad::IndexArray;
using xgrad::Shape;

// ---- tokenizer -------------------------------------------------------------------------------

namespace {
bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Length of a verse reference at the start of `line` ("Ge1:1", "1Cor13:4", "SSol2:15"), or 0.
std::size_t reference_length(const std::string& line) {
    std::size_t i = 0;
    const std::size_t n = line.size();
    if (i < n && is_digit(line[i])) ++i;                     // book number: 1Cor, 2Sm, 3Jn
    const std::size_t letters = i;
    while (i < n && is_letter(line[i])) ++i;                 // book: Ge, Exo, Job, SSol
    if (i == letters) return 0;
    const std::size_t chapter = i;
    while (i < n && is_digit(line[i])) ++i;                  // chapter
    if (i == chapter || i == n || line[i] != ':') return 0;
    const std::size_t verse = ++i;
    while (i < n && is_digit(line[i])) ++i;                  // verse
    if (i == verse || (i < n && line[i] != ' ' && line[i] != '\t')) return 0;
    return i;
}
}  // namespace

std::vector<std::string> tokenize(const std::string& line) {
    std::vector<std::string> words;
    std::string word;
    for (std::size_t i = reference_length(line); i <= line.size(); ++i) {
        if (i < line.size() && is_letter(line[i])) {
            word += static_cast<char>(std::tolower(static_cast<unsigned char>(line[i])));
        } else if (!word.empty()) {
            words.push_back(std::move(word));
            word.clear();
        }
    }
    return words;
}

std::vector<std::string> read_corpus(const std::string& path) {
    const std::string text = path.empty() ? xgrad::data::read_bible() : xgrad::data::read_text_file(path);
    std::vector<std::string> tokens;
    std::size_t begin = 0;
    while (begin < text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        for (auto& w : tokenize(text.substr(begin, end - begin))) tokens.push_back(std::move(w));
        begin = end + 1;
    }
    if (tokens.empty())
        throw std::runtime_error("read_corpus: no words read from " + (path.empty() ? std::string("the KJV") : "'" + path + "'"));
    return tokens;
}

// ---- vocabulary --------------------------------------------------------------------------------

std::int64_t Vocab::id(const std::string& word) const {
    const auto it = ids.find(word);
    return it == ids.end() ? -1 : it->second;
}

std::int64_t Vocab::total() const { return std::accumulate(counts.begin(), counts.end(), std::int64_t{0}); }

Vocab build_vocab(const std::vector<std::string>& tokens, std::int64_t min_count) {
    std::unordered_map<std::string, std::int64_t> count;
    for (const auto& w : tokens) ++count[w];
    std::vector<std::pair<std::string, std::int64_t>> kept;
    for (const auto& [w, c] : count)
        if (c >= min_count) kept.emplace_back(w, c);
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    Vocab v;
    for (const auto& [w, c] : kept) {
        v.ids.emplace(w, static_cast<std::int64_t>(v.words.size()));
        v.words.push_back(w);
        v.counts.push_back(c);
    }
    return v;
}

std::vector<std::int32_t> encode(const std::vector<std::string>& tokens, const Vocab& vocab) {
    std::vector<std::int32_t> ids;
    ids.reserve(tokens.size());
    for (const auto& w : tokens)
        if (const std::int64_t id = vocab.id(w); id >= 0) ids.push_back(static_cast<std::int32_t>(id));
    return ids;
}

// ---- subsampling ------------------------------------------------------------------------------------

std::vector<double> keep_probabilities(const Vocab& vocab, double t) {
    const double N = static_cast<double>(vocab.total());
    std::vector<double> keep(vocab.counts.size());
    for (std::size_t w = 0; w < keep.size(); ++w) {
        const double f = static_cast<double>(vocab.counts[w]) / N;            // relative frequency
        keep[w] = t <= 0 ? 1.0 : std::min(1.0, (std::sqrt(f / t) + 1) * t / f);  // word2vec.c
    }
    return keep;
}

std::vector<std::int32_t> subsample(const std::vector<std::int32_t>& ids, const std::vector<double>& keep,
                                    std::mt19937_64& rng) {
    std::vector<std::int32_t> out;
    out.reserve(ids.size());
    for (const std::int32_t w : ids)
        if (uniform01(rng) < keep[static_cast<std::size_t>(w)]) out.push_back(w);
    return out;
}

// ---- skip-gram pairs ------------------------------------------------------------------------------------

std::vector<Pair> skipgram_pairs(const std::vector<std::int32_t>& ids, int window, std::mt19937_64& rng) {
    std::vector<Pair> pairs;
    const auto n = static_cast<std::ptrdiff_t>(ids.size());
    pairs.reserve(ids.size() * static_cast<std::size_t>(window + 1));  // E[2b] = window + 1
    for (std::ptrdiff_t i = 0; i < n; ++i) {
        const auto b = static_cast<std::ptrdiff_t>(1 + rng() % static_cast<std::uint64_t>(window));  // b ∈ {1..window}
        for (std::ptrdiff_t j = std::max<std::ptrdiff_t>(0, i - b); j <= std::min(n - 1, i + b); ++j)
            if (j != i) pairs.push_back({ids[std::size_t(i)], ids[std::size_t(j)]});
    }
    return pairs;
}

std::vector<Pair> epoch_pairs(const std::vector<std::int32_t>& ids, const std::vector<double>& keep, int window,
                              std::mt19937_64& rng) {
    std::vector<Pair> pairs = skipgram_pairs(subsample(ids, keep, rng), window, rng);
    // Shuffled, so that a batch mixes the whole corpus instead of one passage's ~B/(window+1)
    // consecutive centre words (Fisher–Yates with our own generator: reproducible).
    for (std::size_t i = pairs.size(); i > 1; --i) std::swap(pairs[i - 1], pairs[rng() % i]);
    return pairs;
}

// ---- negative sampling ----------------------------------------------------------------------------------

NegativeSampler::NegativeSampler(const std::vector<std::int64_t>& counts, double power) {
    if (counts.empty()) throw std::invalid_argument("NegativeSampler: empty vocabulary");
    cumulative_.resize(counts.size());
    double z = 0;  // Σ_u count(u)^power
    for (std::size_t w = 0; w < counts.size(); ++w) cumulative_[w] = z += std::pow(double(counts[w]), power);
    for (double& c : cumulative_) c /= z;
    cumulative_.back() = 1.0;  // no rounding gap above the last word
}

std::int32_t NegativeSampler::draw(std::mt19937_64& rng) const {
    const double r = uniform01(rng);  // r ∈ [0, 1): the first w with c_w > r has P(w) = c_w − c_{w−1}
    return static_cast<std::int32_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), r) - cumulative_.begin());
}

double NegativeSampler::probability(std::int32_t w) const {
    const auto i = static_cast<std::size_t>(w);
    return cumulative_[i] - (i == 0 ? 0.0 : cumulative_[i - 1]);
}

// ---- batches ------------------------------------------------------------------------------------------------

Batch make_batch(const std::vector<Pair>& pairs, std::size_t begin, std::size_t end, int negatives,
                 const NegativeSampler& sampler, std::mt19937_64& rng) {
    const std::size_t B = end - begin, K1 = 1 + static_cast<std::size_t>(negatives);
    IndexArray centres(xgrad::ArrayShape{B, 1}), contexts(xgrad::ArrayShape{B, K1});
    xgrad::Array targets = xt::zeros<xgrad::real>(xgrad::ArrayShape{B, K1});
    for (std::size_t b = 0; b < B; ++b) {
        centres(b, 0) = pairs[begin + b].centre;
        contexts(b, 0) = pairs[begin + b].context;  // the positive, target 1
        targets(b, 0) = 1;
        for (std::size_t j = 1; j < K1; ++j) contexts(b, j) = sampler.draw(rng);  // negatives, target 0
    }
    return {xgrad::IndexTensor(std::move(centres)), xgrad::IndexTensor(std::move(contexts)),
            xgrad::from_array(std::move(targets))};
}

}  // namespace word2vec
