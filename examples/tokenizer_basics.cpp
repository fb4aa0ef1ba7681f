// examples/tokenizer_basics.cpp — from text to token IDs: byte-pair encoding, step by step.
//
// The step before the embedding lesson. A model reads integers, not letters: a tokenizer turns
// the text into a list of token IDs, and each ID then selects one row of the table E (V, d).
// This program, on the first five verses of Genesis (King James Version):
//   1. splits the paragraph into chunks with GPT-4's pattern (text/split.hpp): a merge never
//      crosses a chunk, so " the" can become one token but "the." cannot
//   2. trains a byte-level BPE tokenizer on it the lesson's way (text::train_lesson): the 256
//      byte values are the first tokens; each round counts every adjacent pair of tokens and
//      the most frequent pair becomes a new token
//   3. encodes Genesis 1:1 (its bytes, then the merges in the order learned) and decodes it back
//   4. looks the IDs up in a small embedding table E (V, d): the embedding lesson starts there
//
// Legend: M merges, V vocabulary size (256 + M), N tokens of the verse, d embedding width.
//
//   merge i   (left, right) → 256 + i          bytes(256 + i) = bytes(left) + bytes(right)
//   encode    text → chunks → bytes → merges   ids (N,) int64, each in [0, V)
//   decode    ids → the bytes of each token, concatenated
//   lookup    X (N, d) = E (V, d) [ids]        row i of X is row ids[i] of E
//
// Checks: the fast trainer (text::train) learns the same merges, decode(encode(x)) == x, and each
// row of X is the row of E its ID names. The program exits with status 1 on a mismatch, which is
// how the test suite runs it (ctest: example_tokenizer_basics).
//
// Run: build/examples/tokenizer_basics
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/text/tokenizer.hpp>
#include <xgrad/text/train.hpp>

using namespace xgrad;

static int failures = 0;

// Prints "check label ... ok" and counts a failed check.
static void expect(const std::string& label, bool ok) {
    fmt::print("  check {:<62} {}\n", label, ok ? "ok" : "MISMATCH");
    if (!ok) ++failures;
}

// A token's bytes in double quotes, a line break as \n and any other unprintable byte as \xNN.
static std::string quoted(std::string_view bytes) {
    std::string out = "\"";
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '\n') out += "\\n";
        else if (b < 0x20 || b >= 0x7f) out += fmt::format("\\x{:02x}", b);
        else out += c;
    }
    return out + "\"";
}

// Genesis 1:1–5, one verse per line (the text the `bible` program prints, without references).
static const std::string kParagraph =
    "In the beginning God created the heaven and the earth.\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep. "
    "And the Spirit of God moved upon the face of the waters.\n"
    "And God said, Let there be light: and there was light.\n"
    "And God saw the light, that it was good: and God divided the light from the darkness.\n"
    "And God called the light Day, and the darkness he called Night. "
    "And the evening and the morning were the first day.\n";
static const std::string kVerse = "In the beginning God created the heaven and the earth.";
static const std::int64_t kMerges = 48;  // M: the vocabulary grows from 256 to V = 304 tokens

// ---- 1. the split ---------------------------------------------------------------------------
static void split(const text::Splitter& splitter) {
    const auto chunks = splitter.split(kParagraph);
    fmt::print("1. Split: the paragraph, {} bytes, is {} chunks; the first verse's:\n  ", kParagraph.size(),
               chunks.size());
    for (const std::string_view chunk : chunks) {
        fmt::print(" {}", quoted(chunk));
        if (chunk.find('\n') != std::string_view::npos) break;  // the end of the verse
    }
    const std::string_view the = chunks[1];
    fmt::print("\n   Each chunk starts as its bytes, IDs 0..255: {} = [{}]\n", quoted(the),
               fmt::join(std::vector<int>(the.begin(), the.end()), ", "));
}

// ---- 2. training: the most frequent pair becomes a new token, M times ------------------------
static text::Tokenizer train(const text::Splitter& splitter) {
    fmt::print("\n2. Train: {} merges, each the most frequent adjacent pair of the paragraph\n", kMerges);
    fmt::print("  {:>5}  {:>12}    {:>6}  {:<14} {:>5}\n", "merge", "pair", "new ID", "bytes", "count");
    std::vector<std::string> vocab;  // (V,) ID → bytes, grown as the merges are made
    for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, char(b)));
    auto show = [&](std::int64_t i, const text::LearnedMerge& m) {
        vocab.push_back(vocab[std::size_t(m.pair.left)] + vocab[std::size_t(m.pair.right)]);
        fmt::print("  {:>5}  ({:>4}, {:>4}) →  {:>6}  {:<14} {:>5}\n", i, m.pair.left, m.pair.right, 256 + i,
                   quoted(vocab.back()), m.count);
    };
    const auto merges = text::train_lesson(kParagraph, 256 + kMerges, splitter, show);
    const auto fast = text::train(kParagraph, 256 + kMerges, splitter);
    bool same = fast.size() == merges.size();
    for (std::size_t i = 0; same && i < merges.size(); ++i)
        same = fast[i].pair == merges[i].pair && fast[i].count == merges[i].count;
    expect("the fast trainer learns the same merges, in the same order", same);
    return text::make_tokenizer(merges, splitter);
}

// ---- 3. encoding and decoding ------------------------------------------------------------------
static text::TokenIds encode(const text::Tokenizer& tok) {
    const text::TokenIds ids = tok.encode(kVerse);
    fmt::print("\n3. Encode {}\n", quoted(kVerse));
    fmt::print("   {} bytes → N = {} tokens ({:.2f} bytes per token)\n", kVerse.size(), ids.size(),
               double(kVerse.size()) / double(ids.size()));
    fmt::print("   ids    [{}]\n   tokens", fmt::join(ids, ", "));
    for (const text::TokenId id : ids) fmt::print(" {}", quoted(tok.bytes(id)));
    fmt::print("\n");
    const std::string back = tok.decode(ids);
    fmt::print("   decode(ids) = {}\n", quoted(back));
    expect("decode(encode(verse)) == verse", back == kVerse);
    bool below_v = true;
    for (const text::TokenId id : ids) below_v = below_v && id >= 0 && id < tok.n_vocab();
    expect(fmt::format("every ID is in [0, V) = [0, {})", tok.n_vocab()), below_v);
    return ids;
}

// ---- 4. the lookup: token IDs select rows of E ------------------------------------------------
static void lookup(const text::Tokenizer& tok, const text::TokenIds& ids) {
    const std::int64_t V = tok.n_vocab(), d = 4;
    manual_seed(1234);
    nn::Embedding E(V, d);                  // weight (V, d) ~ N(0, 1)
    const Tensor X = E.forward(IndexTensor(ids));  // (N, d)
    fmt::print("\n4. Look up the IDs in E, shape ({}, {}), N(0, 1) after manual_seed(1234): X has shape {}\n", V, d,
               shape_str(X.shape()));
    fmt::print("  {:>4}  {:<14}{:>9}{:>9}{:>9}{:>9}\n", "ID", "bytes", "f0", "f1", "f2", "f3");
    bool rows_match = true;
    for (std::int64_t i = 0; i < X.size(0); ++i) {
        const std::int64_t id = ids[std::size_t(i)];
        fmt::print("  {:>4}  {:<14}", id, quoted(tok.bytes(id)));
        for (std::int64_t j = 0; j < d; ++j) {
            fmt::print("{:>9.4f}", X.at({i, j}));
            rows_match = rows_match && X.at({i, j}) == E.weight.at({id, j});
        }
        fmt::print("\n");
    }
    expect("row i of X is row ids[i] of E", rows_match);
    std::int64_t repeats = 0;  // " the": one row, wherever the token stands
    for (const text::TokenId id : ids) repeats += id == ids[2];
    fmt::print("   {} is at {} positions, with {} equal rows: a row knows nothing of its neighbours.\n",
               quoted(tok.bytes(ids[2])), repeats, repeats);
    fmt::print("   Token IDs select rows of E (V, d): the embedding lesson (embedding_basics) starts here.\n");
}

int main() {
    const text::Splitter splitter;  // GPT-4's pattern
    split(splitter);
    const text::Tokenizer tok = train(splitter);
    const text::TokenIds ids = encode(tok);
    lookup(tok, ids);
    fmt::print("\n{}\n", failures == 0 ? "All checks pass." : fmt::format("{} MISMATCHES", failures));
    return failures == 0 ? 0 : 1;
}
