// text/train.hpp — learning the merges: byte-pair encoding's training (Sennrich et al. 2016,
// "Neural Machine Translation of Rare Words with Subword Units", arXiv:1508.07909; byte-level as in
// GPT-2, Radford et al. 2019).
//
// Legend: M merges to learn (vocab_size − 256), C chunks of the text, U distinct chunks.
//
// The lesson (train_lesson, karpathy/minbpe's RegexTokenizer.train):
//   split the text into chunks; each chunk is a list of byte IDs
//   repeat M times:
//     count every adjacent pair in every chunk                      (pairs never cross chunks)
//     take the most frequent pair; ties go to the pair seen first in the text
//     replace it everywhere by a new ID, 256 + i, left to right
// Each round reads the whole text: O(M · text) work, 3,840 passes over the KJV for 4,096 tokens.
//
// The fast way (train), which learns the same merges:
//   - a text repeats its chunks (the KJV: 1.1 M chunks, 33 k distinct), so each distinct chunk is
//     kept once, with its count; a pair's count is the sum over the chunks holding it
//   - the counts live in a priority queue and are updated, not recounted: merging a pair changes
//     only the chunks that hold it, so only their pairs' counts change
// The tie rule is kept exactly: the distinct chunks are numbered in the order they first occur,
// so among pairs of equal count the one seen first lies in the lowest-numbered chunk, and in it at
// the lowest position.
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
// Throws std::invalid_argument if vocab_size < 256 or > 2^31 − 1, or if the text runs out of
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
