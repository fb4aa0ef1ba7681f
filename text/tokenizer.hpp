// text/tokenizer.hpp — byte-pair encoding (BPE): text ↔ token IDs, the step before the embedding.
//
// Legend: M merges learned, V vocabulary size (256 bytes + M merges + the special tokens), N tokens.
//
//   merge i:  (left, right) → 256 + i        bytes(256 + i) = bytes(left) + bytes(right)
//   encode a chunk: its bytes, then while an adjacent pair is a merge, the earliest merge's pair
//                   replaced everywhere, left to right
//   decode: the tokens' bytes, concatenated; decode(encode(x)) == x for every byte string x
//
// The algorithm with Wikipedia's example, special tokens and the file: text/README.md. The lesson
// is karpathy/minbpe's RegexTokenizer, whose IDs this tokenizer gives exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "split.hpp"

namespace xgrad::text {

using TokenId = std::int64_t;          // int64, as PyTorch's token tensors
using TokenIds = std::vector<TokenId>;

struct Pair {
    TokenId left = 0, right = 0;
    bool operator==(const Pair& o) const { return left == o.left && right == o.right; }
};

// A special token: its text and its ID.
struct SpecialToken {
    std::string text;
    TokenId id = 0;
};

// How encode() treats special tokens' text found in its input (tiktoken's allowed_special).
enum class Special {
    none_raise,  // throw ValueError if the text contains one (the default: the safe one)
    none,        // encode it as ordinary text, byte by byte and merges
    all,         // encode it as its special ID
};

// Errors are xgrad's (io/error.hpp, the classes core/error.hpp uses): ValueError for bad merges,
// special tokens, files and for a moved-from Tokenizer (the source of a move), whose every member
// but assignment throws, saying so; IndexError for an ID that is no token.
class Tokenizer {
public:
    // The 256 byte tokens, no merges, no special tokens, GPT-4's split.
    Tokenizer();
    // The byte tokens and `merges` (merge i makes token 256 + i), split by `pattern`.
    // Throws ValueError if a merge uses a token that does not exist before it
    // (left or right ≥ 256 + i, or < 0), repeats an earlier pair, or spells a token that takes the
    // bytes of all tokens past 256 MiB (merges that pair a token with itself double it), naming
    // the merge; and for a pattern that does not compile (Splitter).
    Tokenizer(std::vector<Pair> merges, std::string pattern = std::string(kGpt4Pattern));

    // Adds special tokens. Each text is non-empty, at most 256 bytes, valid in a one-line file
    // (no whitespace or control bytes), distinct from the others; each ID is ≥ 256 + M (above
    // the merged tokens), < 2^31 and distinct. Throws ValueError naming the token otherwise; then
    // nothing is added.
    void register_special_tokens(const std::vector<SpecialToken>& specials);

    // 256 + M + the number of special tokens.
    std::int64_t vocab_size() const;
    // The size of an embedding table that can look up every ID: 1 + the largest ID.
    std::int64_t n_vocab() const;
    std::int64_t n_merges() const;
    const std::vector<Pair>& merges() const;
    const std::vector<SpecialToken>& special_tokens() const;
    const std::string& pattern() const;
    const Splitter& splitter() const;

    // The bytes of token `id` (for a special token, its text). Throws IndexError naming the ID
    // and the valid ranges.
    const std::string& bytes(TokenId id) const;

    // The IDs of `text` (any bytes; UTF-8 for the split to see characters), special tokens'
    // text treated as `allowed` says (under Special::none_raise, ValueError naming the special
    // token and its byte). (N,) int64, each in [0, n_vocab()).
    TokenIds encode(std::string_view text, Special allowed = Special::none_raise) const;
    // The IDs of `text` with every special token's text encoded as ordinary text.
    TokenIds encode_ordinary(std::string_view text) const;
    // The IDs of one chunk: its bytes, then the merges in order (the algorithm above).
    TokenIds encode_chunk(std::string_view chunk) const;
    // The two ways encode_chunk chooses between, by the chunk's length (tokenizer.cpp): the
    // lesson's rounds (minbpe's _encode_chunk, up to n rounds of O(n)) and a heap over the pairs
    // of a linked list of tokens (O(n log n)). The same IDs for every chunk.
    TokenIds encode_chunk_lesson(std::string_view chunk) const;
    TokenIds encode_chunk_heap(std::string_view chunk) const;

    // The bytes of `ids`, concatenated. Throws IndexError naming the position and value of the
    // first ID that is no token. The result may end inside a UTF-8 character (when `ids`
    // is a prefix of an encoding).
    std::string decode(const TokenIds& ids) const;

    // Writes the tokenizer to `path` as text (the format below), atomically with
    // io::write_file_atomically (io/atomic_file.hpp: a symbolic link is written through, the link
    // stays). Throws std::runtime_error naming the path and the reason (a missing directory, no
    // permission, a full disk, a target that is not a regular file); ValueError for a split
    // pattern with a line break, which the one-line field cannot hold.
    //
    //   xgrad-bpe 1
    //   pattern <the split pattern, one line>
    //   merges <M>
    //   <left> <right>                 M lines: merge i makes token 256 + i
    //   specials <S>
    //   <id> <text>                    S lines
    //   crc32 <8 hex digits>           zlib's CRC-32 of every byte before this line
    void save(const std::string& path) const;
    // The file's lines above its checksum: the header, the pattern, the merges and the special
    // tokens. Equal for two tokenizers exactly when they are equal (operator==): an identity to
    // hash.
    std::string to_text() const;
    // "bpe V 1024: 768 merges, FNV-1a <16 hex digits>", the 64-bit FNV-1a hash of to_text()
    // (io/checksum.hpp): equal for two tokenizers that give every id the same bytes. A training
    // state records it (train::TextFingerprint::tokenizer) so that a resume with another
    // tokenizer is refused.
    std::string identity() const;
    // Reads a file written by save(). Throws std::runtime_error naming the path for a missing or
    // unreadable file or a path that is not a regular file (a FIFO, which would block, a
    // directory, a device), as nn::load_safetensors does; ValueError naming the path and line
    // for a file over 64 MiB, a wrong header, a malformed line, a wrong checksum, or merges and
    // special tokens that the constructor and register_special_tokens refuse.
    static Tokenizer load(const std::string& path);

    // The same merges, special tokens and pattern.
    bool operator==(const Tokenizer& o) const;
    bool operator!=(const Tokenizer& o) const { return !(*this == o); }

private:
    static std::uint64_t key(TokenId left, TokenId right) {
        return (std::uint64_t(left) << 32) | std::uint64_t(right);
    }
    // Ordinary text: split, then each chunk. A text repeats its chunks, so each distinct chunk is
    // encoded once per call and its IDs copied from `ids` after that (chunk → [begin, end) there).
    using ChunkCache = std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>>;
    TokenIds encode_text(std::string_view text) const;
    void encode_text(std::string_view text, TokenIds& ids, ChunkCache& seen) const;
    // Appends merge M (token 256 + M); throws ValueError as the constructor says.
    void add_merge(Pair merge);
    // Throws ValueError naming "Tokenizer::<op>" if this Tokenizer was moved from.
    void check_not_moved_from(const char* op) const;

    std::vector<Pair> merges_;
    std::unordered_map<std::uint64_t, TokenId> rank_;  // (left, right) → the merged token's ID
    std::vector<std::string> vocab_;                   // (256 + M,) ID → bytes
    std::size_t vocab_bytes_ = 256;                    // Σ |vocab_[id]|, in bytes
    std::vector<SpecialToken> specials_;
    Splitter splitter_;  // moved from exactly when the Tokenizer was
};

}  // namespace xgrad::text
