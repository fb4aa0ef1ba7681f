// tests/text/bpe_reference.hpp — tests/reference/bpe_reference.json as C++ values, for the tests
// of text/ (test_split.cpp, test_tokenizer.cpp, test_tokenizer_file.cpp, test_train.cpp). The
// JSON is written by tests/reference/make_bpe_reference.py, karpathy/minbpe's RegexTokenizer in
// Python:
//
//   excerpt      the opening of the KJV, 11,987 bytes (Genesis 1:1 to 4:7, one verse a line)
//   merges       256 merges (left, right, count) learned on it, GPT-4's split (vocab_size 512)
//   merges_gpt2  64 merges learned on it, GPT-2's split (vocab_size 320)
//   split        texts and their chunks under both patterns (Python's regex.findall)
//   encodings    texts and their IDs with `merges`; excerpt_ids: the excerpt's IDs
//   wikipedia    "aaabdaaabac", its 3 merges and IDs
//   llama        a text with special tokens, its 64 merges, the special tokens, its IDs (all allowed)
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/text/train.hpp>
#include "reference/reference_json.hpp"

namespace xgrad::testing::bpe {

inline const nlohmann::json& reference() { return reference_json("bpe_reference.json"); }

inline const std::string& excerpt() {
    static const std::string text = reference().at("excerpt").get<std::string>();
    return text;
}

// [[left, right, count], ...] as the trainers return them.
inline std::vector<text::LearnedMerge> learned_merges(const nlohmann::json& rows) {
    std::vector<text::LearnedMerge> merges;
    for (const nlohmann::json& r : rows) {
        REQUIRE(r.size() == 3);
        merges.push_back({{r[0].get<text::TokenId>(), r[1].get<text::TokenId>()}, r[2].get<std::int64_t>()});
    }
    return merges;
}

inline std::vector<text::Pair> pairs_of(const std::vector<text::LearnedMerge>& merges) {
    std::vector<text::Pair> pairs;
    for (const text::LearnedMerge& m : merges) pairs.push_back(m.pair);
    return pairs;
}

// The reference tokenizer: the excerpt's 256 merges, GPT-4's split, no special tokens.
inline const text::Tokenizer& excerpt_tokenizer() {
    static const text::Tokenizer tokenizer(pairs_of(learned_merges(reference().at("merges"))));
    return tokenizer;
}

// "(left, right) x count", so that a failed comparison prints both merges.
inline std::string merge_str(const text::LearnedMerge& m) {
    std::ostringstream out;
    out << "(" << m.pair.left << ", " << m.pair.right << ") x " << m.count;
    return out.str();
}

// The same merges in the same order, pairs and counts; a failure names the first that differs.
inline void require_same_merges(const std::vector<text::LearnedMerge>& got,
                                const std::vector<text::LearnedMerge>& want) {
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        INFO("merge " << i << ", token " << 256 + i);
        REQUIRE(merge_str(got[i]) == merge_str(want[i]));
    }
    REQUIRE(got.size() == want.size());
}

}  // namespace xgrad::testing::bpe
