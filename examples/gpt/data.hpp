// examples/gpt/data.hpp — text → character ids → (B, T+1) training windows.
//
// Legend: N characters of text, V vocabulary size, B batch, T block (characters of context).
//
//   text ──Vocab──▶ ids (N,) ──first 90% / last 10%──▶ train, val
//        ──random offsets o──▶ x (B, T) = ids[o : o+T],  y (B, T) = ids[o+1 : o+T+1]
//
// Every position of a window is a training example: y[b, t] is the character after
// x[b, 0..t], so one window of T+1 characters gives T next-character predictions.
// The text is the King James Bible exactly as `bible -f "gen1:1-rev22:21"` prints it (verse
// references such as "Ge1:1" included: V = 73), or any file (--data); one byte is one token
// (--tokenizer bpe makes the ids from byte pairs instead: tokens.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace gpt {

using Ids = std::vector<std::int64_t>;

// The vocabulary: the sorted set of the bytes that occur in the text.
struct Vocab {
    std::string chars;                 // (V,) id → byte, ascending
    std::array<std::int16_t, 256> id;  // byte → id, -1 if absent

    std::int64_t size() const { return std::int64_t(chars.size()); }
    // Throws std::runtime_error naming the first character not in the vocabulary.
    Ids encode(const std::string& text) const;
    std::string decode(const Ids& ids) const;
};
Vocab build_vocab(const std::string& text);

struct Split {
    Ids train, val;  // the first ⌊9N/10⌋ ids, and the rest
};
// Throws std::runtime_error (naming `source`, the lengths and the minimum) when either part is
// shorter than one window of block + 1 characters, i.e. when the text has fewer than about
// 10·(block + 1) characters.
Split split_ids(const Ids& ids, int block, const std::string& source);

// A batch of windows: x (B, T) and y (B, T) int64, y one character ahead of x.
struct Batch {
    xgrad::IndexTensor x, y;
};
// The windows starting at `offsets` (each in [0, N − T − 1]).
Batch windows(const Ids& data, const std::vector<std::size_t>& offsets, int block);
// B windows at offsets drawn uniformly from [0, N − T − 1] (std::uniform_int_distribution).
Batch sample_batch(const Ids& data, int batch, int block, std::mt19937_64& rng);

// The fixed validation set: n evenly spaced windows, o_j = ⌊j · (N − T − 1) / n⌋ for
// j = 0..n−1. The same every evaluation, and reproducible outside xgrad from N, T and n alone
// (bench/nanogpt.py, val_offsets), so PyTorch can evaluate exactly these windows.
std::vector<std::size_t> fixed_offsets(std::size_t n_data, int block, std::size_t n);

// The count-based bigram model P(next | prev) = (count + 1) / (row total + V), fitted on every
// adjacent pair of `train` (add-one smoothing), and its negative log-likelihood over every
// adjacent pair of `eval`: per token (the mean, nats) and per character (the sum over the bytes
// of the predicted tokens, byte_counts (V,); empty: 1 byte a token, so both are equal). The floor
// a model that sees one token of context should beat.
struct BigramLoss {
    double per_token = 0, per_char = 0;  // nats/token, nats/char
};
BigramLoss bigram_loss(const Ids& train, const Ids& eval, std::int64_t vocab,
                       const std::vector<std::int64_t>& byte_counts = {});
double bigram_nll(const Ids& train, const Ids& eval, std::int64_t vocab);  // bigram_loss(...).per_token

}  // namespace gpt
