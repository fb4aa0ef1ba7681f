// examples/word2vec/corpus.hpp — text → word IDs → skip-gram training pairs.
//
// The data side of skip-gram with negative sampling (Mikolov et al. 2013, "Distributed
// Representations of Words and Phrases and their Compositionality", NIPS; the reference
// implementation is word2vec.c from the original word2vec release):
//
//   text ──tokenize──▶ words ──Vocab (min_count)──▶ IDs (N,) ──subsample──▶ kept IDs
//        ──dynamic window──▶ (centre, context) pairs ──shuffle, + k negatives──▶ batches
//
// Legend: N corpus tokens, V vocabulary size, B pairs per batch, k negatives per pair,
//         f(w) = count(w) / N the relative frequency of word w, t the subsampling threshold.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace word2vec {

// ---- tokenizer -------------------------------------------------------------------------------
// One line → lowercase words. A word is a maximal run of ASCII letters; everything else
// (digits, punctuation, apostrophes, spaces) separates words, so "LORD's" → "lord", "s".
// A leading verse reference, as `bible` prints it ("Ge1:1", "1Cor13:4": an optional digit,
// letters, digits, ':', digits), is dropped first; a word like "Job" later in the line is kept.
//     "Ge1:1 In the beginning God created the heaven and the earth."
//   → in the beginning god created the heaven and the earth
std::vector<std::string> tokenize(const std::string& line);

// Every token of a text (xgrad::data::read_bible or read_text_file), line by line. path empty: the
// whole King James Bible; otherwise a plain-text file. Throws std::runtime_error if the program
// or file cannot be read or yields no words.
std::vector<std::string> read_corpus(const std::string& path);

// ---- vocabulary --------------------------------------------------------------------------------
// Words seen at least min_count times, most frequent first (ties alphabetically), so that ID 0
// is the commonest word. Rarer words are dropped from the corpus, as word2vec.c does.
struct Vocab {
    std::vector<std::string> words;                        // (V,) ID → word
    std::vector<std::int64_t> counts;                      // (V,) occurrences in the corpus
    std::unordered_map<std::string, std::int64_t> ids;     // word → ID

    std::int64_t size() const { return static_cast<std::int64_t>(words.size()); }
    std::int64_t id(const std::string& word) const;        // -1 if not in the vocabulary
    std::int64_t total() const;                            // Σ counts: tokens kept by encode()
};
Vocab build_vocab(const std::vector<std::string>& tokens, std::int64_t min_count);

// The corpus as IDs, out-of-vocabulary tokens removed.   (N,)
std::vector<std::int32_t> encode(const std::vector<std::string>& tokens, const Vocab& vocab);

// ---- subsampling of frequent words -------------------------------------------------------------
// Each occurrence of w is kept with probability
//     keep(w) = min(1, (√(f/t) + 1) · t/f),    f = count(w) / N
// This is word2vec.c's formula (the variable `ran` in TrainModelThread). The paper writes
// P_discard = 1 − √(t/f), i.e. keep = √(t/f); word2vec.c adds t/f, which keeps slightly more
// of every word and all words with f ≤ 2.6·t. With t = 1e-5 on the KJV (N = 778,638 after
// min_count 5), "the" (f ≈ 0.082) keeps about 1 occurrence in 90, words seen 20 times or fewer
// are always kept, and an epoch keeps 15% of the tokens.
// Returns (V,).
std::vector<double> keep_probabilities(const Vocab& vocab, double t);
// One random pass: each token survives with its keep probability.
std::vector<std::int32_t> subsample(const std::vector<std::int32_t>& ids, const std::vector<double>& keep,
                                    std::mt19937_64& rng);

// ---- skip-gram pairs ------------------------------------------------------------------------------
// For every position i, draw a window b uniformly from {1, …, window} and pair the centre
// word with each of its neighbours at distance 1..b on either side. Drawing b per centre
// (word2vec.c's "reduced window") weights a neighbour at distance j by (window − j + 1)/window:
// near words count more than far ones.
struct Pair {
    std::int32_t centre, context;
};
std::vector<Pair> skipgram_pairs(const std::vector<std::int32_t>& ids, int window, std::mt19937_64& rng);

// ---- negative sampling ---------------------------------------------------------------------------------
// Draws word IDs from the "unigram distribution raised to the 3/4 power" of the paper:
//     P_n(w) = count(w)^0.75 / Σ_u count(u)^0.75
// The 3/4 power flattens the distribution: frequent words are still drawn often, but rare
// words more often than their raw frequency. The sampler keeps the cumulative sums
// c_w = Σ_{u ≤ w} P_n(u) and inverts them: draw r ~ U[0, 1), return the first w with c_w > r
// (a binary search, O(log V)). word2vec.c uses a 1e8-entry lookup table instead; the
// cumulative table is exact and small.
class NegativeSampler {
public:
    NegativeSampler(const std::vector<std::int64_t>& counts, double power = 0.75);
    std::int32_t draw(std::mt19937_64& rng) const;
    double probability(std::int32_t w) const;  // P_n(w)
    std::size_t size() const { return cumulative_.size(); }

private:
    std::vector<double> cumulative_;  // (V,), last entry exactly 1
};

// A uniform double in [0, 1) from 53 random bits: the same sequence on every platform
// (std::uniform_real_distribution is not specified bit for bit).
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// ---- batches ------------------------------------------------------------------------------------------------
// Each row holds one pair and its k negatives:
//   centres   (B, 1)      int64   c
//   contexts  (B, 1+k)    int64   o, n_1, …, n_k      (column 0 is the true context)
//   targets   (B, 1+k)    real    1, 0, …, 0
// Negatives are drawn independently of the pair; one equal to o is kept, as in PyTorch ports
// (word2vec.c skips it; at V ≈ 5000 it happens in well under 1% of draws).
struct Batch {
    xgrad::IndexTensor centres, contexts;
    xgrad::Tensor targets;
};
Batch make_batch(const std::vector<Pair>& pairs, std::size_t begin, std::size_t end, int negatives,
                 const NegativeSampler& sampler, std::mt19937_64& rng);

// One epoch of training data: subsample, pair, shuffle. pairs[0..) are then cut into batches.
std::vector<Pair> epoch_pairs(const std::vector<std::int32_t>& ids, const std::vector<double>& keep,
                              int window, std::mt19937_64& rng);

}  // namespace word2vec
