// text/train.hpp — learning the merges: byte-pair encoding's training (Sennrich et al. 2016,
// arXiv:1508.07909; byte-level as in GPT-2), the lesson's way and the fast way.
//
// Legend: M merges to learn (vocab_size − 256), U distinct chunks of the text.
//
//   repeat M times: count every adjacent pair of every chunk; the most frequent pair (a tie goes
//   to the pair seen first in the text) becomes token 256 + i, replaced everywhere
//
// train_lesson counts again every round (karpathy/minbpe's RegexTokenizer.train); train keeps the
// U distinct chunks with their counts and updates the pair counts in a priority queue. Both learn
// the same merges: text/README.md, section 3.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tokenizer.hpp"

namespace xgrad::text {

// One learned merge: (left, right) became ID 256 + i after occurring `count` times.
struct LearnedMerge {
    Pair pair;
    std::int64_t count = 0;
};

// Called after each merge with its index i (its new token is 256 + i).
using MergeCallback = std::function<void(std::int64_t i, const LearnedMerge&)>;

// The merges of a tokenizer with `vocab_size` tokens learned on `text`, the fast way.
// Throws ValueError if vocab_size < 256 or > 2^31 − 1, or if the text runs out of
// pairs first (every chunk became one token), naming how many merges it allowed.
std::vector<LearnedMerge> train(std::string_view text, std::int64_t vocab_size, const Splitter& split = Splitter(),
                                const MergeCallback& on_merge = nullptr);

// The same merges, the lesson's way: every round counts every pair of every chunk. For small texts.
std::vector<LearnedMerge> train_lesson(std::string_view text, std::int64_t vocab_size,
                                       const Splitter& split = Splitter(), const MergeCallback& on_merge = nullptr);

// A tokenizer from learned merges: train(...) then this, or train_tokenizer in one call.
Tokenizer make_tokenizer(const std::vector<LearnedMerge>& merges, const Splitter& split = Splitter());
Tokenizer train_tokenizer(std::string_view text, std::int64_t vocab_size, const Splitter& split = Splitter());

}  // namespace xgrad::text
