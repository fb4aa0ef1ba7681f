// examples/char_mlp/data.hpp — words → character windows for a next-character model.
//
// Vocabulary (V = 27): id 0 is '.', the boundary marker; ids 1..26 are 'a'..'z'.
// Each word w of length n gives n + 1 examples: the previous `block` characters (padded on
// the left with '.') predict the next character, and the last one predicts the closing '.':
//     "emma", block 3:   ... → e,  ..e → m,  .em → m,  emm → a,  mma → .
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace char_mlp {

constexpr int kVocab = 27;
inline char id_to_char(std::int64_t id) { return id == 0 ? '.' : char('a' + id - 1); }

// Reads one word per line; lowercases; keeps words made only of a–z; removes duplicates
// (first occurrence wins). Throws std::runtime_error naming the file (and the first line that
// was rejected) if the file is missing, empty, not a regular file (a directory, a FIFO, a
// device), or has no usable word.
std::vector<std::string> load_words(const std::string& path);

struct Split {
    std::vector<std::string> train, val, test;
};
// Shuffles with std::mt19937_64(seed), then cuts 80% / 10% / 10%.
Split split_words(std::vector<std::string> words, std::uint64_t seed);

// All (context, next) examples of a word list.  X (N, block) int64,  Y (N,) int64.
struct Examples {
    xgrad::IndexTensor X, Y;
    std::size_t size() const { return Y.numel(); }
};
Examples make_examples(const std::vector<std::string>& words, int block);

// Draws a minibatch of `batch` examples uniformly with replacement.  x (B, block), y (B,).
struct Batch {
    xgrad::IndexTensor x, y;
};
Batch sample_batch(const Examples& data, std::size_t batch, std::mt19937_64& rng);
// Rows [begin, end) in order, for evaluation.
Batch slice(const Examples& data, std::size_t begin, std::size_t end);

// The count-based bigram model P(next | prev) = (count + 1) / (row total + V), fitted on
// `train` (add-one smoothing), and its mean negative log-likelihood on `eval`, in nats.
double bigram_nll(const std::vector<std::string>& train, const std::vector<std::string>& eval);

}  // namespace char_mlp
