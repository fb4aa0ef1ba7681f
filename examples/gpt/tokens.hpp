// examples/gpt/tokens.hpp — what a token is: one character (data.hpp's Vocab) or a byte pair
// (text/tokenizer.hpp), and the loss per character that compares the two.
//
// Legend: N bytes of text, V vocabulary size, n tokens; a character is a byte here (the KJV is ASCII).
//
//   --tokenizer char  text ──Vocab──▶ ids ──first 90% / last 10% of the ids──▶ train, val
//   --tokenizer bpe   text ──first 90% / last 10% of the characters──▶ train text, val text
//                     train text ──text::train (V = --vocab-size)──▶ Tokenizer
//                     each part ──encode──▶ train, val ids
//
// Token t stands for bytes(t), one byte or more. A loss per token depends on how much text a token
// holds; a loss per character does not:
//   nats/char = Σ_t CE(t) / Σ_t |bytes(y_t)|      over the same target tokens y_t
// For characters |bytes(y_t)| = 1, so the two are equal. README.md, "Byte-pair tokens", shows both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/text/tokenizer.hpp>

#include "data.hpp"

namespace gpt {

// A run's tokens: characters or byte pairs, behind one interface.
class Tokens {
public:
    static Tokens characters(Vocab vocab);                     // --tokenizer char
    // --tokenizer bpe: V = tokenizer.n_vocab(); an ID that is no token (below a special token's,
    // above the merges') spells "".
    static Tokens byte_pairs(xgrad::text::Tokenizer tokenizer);

    bool is_bpe() const { return bpe_.has_value(); }
    std::int64_t size() const { return std::int64_t(bytes_.size()); }  // V: ids are in [0, V)
    // Characters: throws std::runtime_error naming the first byte outside the vocabulary. Byte
    // pairs: any bytes (GPT-4's split, no special tokens).
    Ids encode(const std::string& text) const;
    std::string decode(const Ids& ids) const;  // throws std::out_of_range for an id outside [0, V)
    const std::string& bytes(std::int64_t id) const { return bytes_.at(std::size_t(id)); }
    // (V,) |bytes(id)|, in bytes: every entry 1 for characters.
    const std::vector<std::int64_t>& byte_counts() const { return byte_counts_; }
    const Vocab& vocab() const;                        // characters only; std::logic_error otherwise
    const xgrad::text::Tokenizer& tokenizer() const;  // byte pairs only; std::logic_error otherwise
    // The checkpoint's vocabulary (train::TextFingerprint::vocab): the characters, or the 256
    // byte values, which are ids 0..255 of every byte-pair tokenizer.
    std::string fingerprint_vocab() const;
    // "" for characters; for byte pairs "bpe V 1024: 768 merges, FNV-1a <16 hex digits>", the hash
    // of Tokenizer::to_text (the split pattern, the merges in order, the special tokens): two
    // tokenizers with the same identity give every id the same bytes.
    std::string identity() const;

private:
    std::optional<Vocab> chars_;
    std::optional<xgrad::text::Tokenizer> bpe_;
    std::vector<std::string> bytes_;          // (V,) id → its bytes
    std::vector<std::int64_t> byte_counts_;   // (V,) id → |bytes|
};

// The raw text cut where split_ids cuts the ids of a character run: the first ⌊9N/10⌋ bytes,
// moved back to the first byte of a UTF-8 character, so that no character is cut in two.
struct TextSplit {
    std::string_view train, val;
};
TextSplit split_text(std::string_view text);

// A byte-pair tokenizer of `vocab_size` tokens learnt on `train` (text::train, GPT-4's split).
// Throws ValueError naming --vocab-size when the text allows fewer merges.
xgrad::text::Tokenizer train_bpe(std::string_view train, std::int64_t vocab_size);

// Where a run keeps the tokenizer of `checkpoint`: tokenizer.bpe in the same directory.
std::string tokenizer_beside(const std::string& checkpoint);
// The tokenizer saved beside `checkpoint` (text::Tokenizer::load), which must hold vocab_size
// tokens. Throws std::runtime_error naming `flag` (--resume, --init-from; --checkpoint for
// gpt_sample, whose vocab_size is the checkpoint's recorded one) and the file when the checkpoint
// is missing, or the tokenizer is (a checkpoint of a --tokenizer char run has none), is
// unreadable or of another size.
xgrad::text::Tokenizer load_bpe_beside(const std::string& checkpoint, std::int64_t vocab_size, const std::string& flag);

// The ids of a byte-pair run as a Split. Throws std::runtime_error (naming `source` and the
// counts) when either part is shorter than one window of block + 1 tokens.
Split split_tokens(Ids train, Ids val, int block, const std::string& source);

// Σ of token losses and of the bytes their targets stand for, over evaluated windows (nats, bytes).
struct LossSum {
    double nats = 0;          // Σ_t CE(t)
    std::int64_t tokens = 0;  // the number of target tokens
    std::int64_t bytes = 0;   // Σ_t |bytes(y_t)|

    // Adds one batch: its mean cross-entropy `mean_nats` over the targets y (any shape), so
    // mean_nats · numel(y) nats, and their bytes from `byte_counts` ((V,); empty: 1 byte a token).
    void add(double mean_nats, const xgrad::IndexTensor& y, const std::vector<std::int64_t>& byte_counts);
    double per_token() const { return nats / double(tokens); }  // nats/token
    double per_char() const { return nats / double(bytes); }    // nats/char
};

}  // namespace gpt
