// examples/gpt/data.hpp — the example's token data: the library's (xgrad::data) under short names,
// and the bigram baseline the run reports.
//
// Legend: N characters of text, V vocabulary size, B batch, T block (characters of context).
//
//   text ──Vocab──▶ ids (N,) ──first 90% / last 10%──▶ train, val            (data/vocab.hpp, shards.hpp)
//        ──random offsets o──▶ x (B, T) = ids[o : o+T],  y (B, T) = ids[o+1 : o+T+1]   (data/sampler.hpp)
//
// The text is the King James Bible exactly as `bible -f "gen1:1-rev22:21"` prints it (verse
// references such as "Ge1:1" included: V = 73), or any file (--data); one byte is one token
// (--tokenizer bpe makes the ids from byte pairs instead: tokens.hpp). The fixed validation
// windows (fixed_offsets) are reproducible outside xgrad from N, T and n alone (bench/nanogpt.py,
// val_offsets), so PyTorch can evaluate exactly these windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/data/sampler.hpp>
#include <xgrad/data/shards.hpp>
#include <xgrad/data/vocab.hpp>

namespace gpt {

using Ids = std::vector<std::int64_t>;
using Vocab = xgrad::data::CharVocab;  // the sorted set of the bytes of the text
using Split = xgrad::data::Split;      // train: the first ⌊9N/10⌋ ids, val: the rest
using Batch = xgrad::data::Batch;      // x (B, T), y (B, T) int64
using xgrad::data::fixed_offsets;      // o_j = ⌊j · (N − T − 1) / n⌋
using xgrad::data::sample_windows;     // B windows at offsets ~ U{0, …, N − T − 1}
using xgrad::data::split_ids;
using xgrad::data::windows;

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
