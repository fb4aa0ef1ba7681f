// text/tokenizer.cpp — encode, decode, special tokens, and the tokenizer's file.
#include "tokenizer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <xgrad/io/atomic_file.hpp>
#include <xgrad/io/checksum.hpp>
#include <xgrad/io/error.hpp>

namespace xgrad::text {

namespace {

constexpr TokenId kBytes = 256;                 // the base vocabulary: one token per byte value
constexpr std::size_t kMaxSpecialBytes = 256;
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;
// Merges that pair a token with itself double it: 40 merges would spell a token of 2^41 bytes. The
// bytes of all tokens together are capped far above a trained vocabulary's (100 k tokens of a few
// bytes each hold about 1 MiB) and far below a machine's memory.
constexpr std::size_t kMaxVocabBytes = std::size_t(1) << 28;
constexpr const char* kHeader = "xgrad-bpe 1";

std::vector<std::string> byte_tokens() {
    std::vector<std::string> vocab;
    for (int b = 0; b < kBytes; ++b) vocab.emplace_back(1, char(b));
    return vocab;
}

}  // namespace

Tokenizer::Tokenizer() : vocab_(byte_tokens()) {}

Tokenizer::Tokenizer(std::vector<Pair> merges, std::string pattern)
    : vocab_(byte_tokens()), splitter_(std::move(pattern)) {
    merges_.reserve(merges.size());
    rank_.reserve(merges.size());
    for (const Pair& m : merges) add_merge(m);
}

void Tokenizer::add_merge(Pair merge) {
    const auto [left, right] = merge;
    const std::size_t i = merges_.size();
    const TokenId id = kBytes + TokenId(i);
    if (left < 0 || right < 0 || left >= id || right >= id)
        throw ValueError(fmt::format("Tokenizer: merge {} ({}, {}) → {} uses a token that does not "
                                                "exist before it; valid IDs are [0, {})",
                                                i, left, right, id, id));
    const std::size_t bytes = vocab_[std::size_t(left)].size() + vocab_[std::size_t(right)].size();
    if (bytes > kMaxVocabBytes - vocab_bytes_)
        throw ValueError(fmt::format("Tokenizer: merge {} ({}, {}) → {} spells a token of {} bytes, which "
                                                "takes the tokens past {} MiB in all (they hold {} bytes before it)",
                                                i, left, right, id, bytes, kMaxVocabBytes >> 20, vocab_bytes_));
    if (!rank_.emplace(key(left, right), id).second)
        throw ValueError(fmt::format("Tokenizer: merge {} repeats the pair ({}, {}) of merge {}", i, left,
                                                right, rank_.at(key(left, right)) - kBytes));
    merges_.push_back(merge);
    vocab_.push_back(vocab_[std::size_t(left)] + vocab_[std::size_t(right)]);
    vocab_bytes_ += bytes;
}

// As Python's ValueError for an operation on a closed file.
void Tokenizer::check_not_moved_from(const char* op) const {
    if (splitter_.moved_from())
        throw ValueError(fmt::format("Tokenizer::{}: this Tokenizer was moved from (std::move gave its merges "
                                     "and split pattern to another); assign it a Tokenizer (Tokenizer::load(path), "
                                     "train_tokenizer(...)) before using it again",
                                     op));
}

void Tokenizer::register_special_tokens(const std::vector<SpecialToken>& specials) {
    check_not_moved_from("register_special_tokens");
    std::vector<SpecialToken> all = specials_;
    const TokenId first_free = kBytes + n_merges();
    for (const SpecialToken& s : specials) {
        const auto bad = std::find_if(s.text.begin(), s.text.end(), [](char c) {
            const auto b = static_cast<unsigned char>(c);
            return b <= 0x20 || b == 0x7F;  // control bytes and the space
        });
        if (s.text.empty() || s.text.size() > kMaxSpecialBytes || bad != s.text.end())
            throw ValueError(fmt::format(
                "register_special_tokens: the special token {:?} (ID {}) must have 1 to {} bytes and no whitespace or "
                "control bytes",
                s.text, s.id, kMaxSpecialBytes));
        if (s.id < first_free || s.id > std::numeric_limits<std::int32_t>::max())
            throw ValueError(fmt::format("register_special_tokens: the ID {} of {:?} must be in [{}, 2^31): "
                                                    "below it are the {} bytes and {} merged tokens",
                                                    s.id, s.text, first_free, kBytes, n_merges()));
        for (const SpecialToken& o : all)
            if (o.id == s.id || o.text == s.text)
                throw ValueError(fmt::format("register_special_tokens: {:?} (ID {}) repeats the {} of {:?} "
                                                        "(ID {})",
                                                        s.text, s.id, o.id == s.id ? "ID" : "text", o.text, o.id));
        all.push_back(s);
    }
    specials_ = std::move(all);
}

std::int64_t Tokenizer::vocab_size() const {
    check_not_moved_from("vocab_size");
    return std::int64_t(vocab_.size() + specials_.size());
}

std::int64_t Tokenizer::n_vocab() const {
    check_not_moved_from("n_vocab");
    TokenId top = TokenId(vocab_.size()) - 1;
    for (const SpecialToken& s : specials_) top = std::max(top, s.id);
    return top + 1;
}

std::int64_t Tokenizer::n_merges() const {
    check_not_moved_from("n_merges");
    return std::int64_t(merges_.size());
}

const std::vector<Pair>& Tokenizer::merges() const {
    check_not_moved_from("merges");
    return merges_;
}

const std::vector<SpecialToken>& Tokenizer::special_tokens() const {
    check_not_moved_from("special_tokens");
    return specials_;
}

const std::string& Tokenizer::pattern() const {
    check_not_moved_from("pattern");
    return splitter_.pattern();
}

const Splitter& Tokenizer::splitter() const {
    check_not_moved_from("splitter");
    return splitter_;
}

const std::string& Tokenizer::bytes(TokenId id) const {
    check_not_moved_from("bytes");
    if (id >= 0 && id < TokenId(vocab_.size())) return vocab_[std::size_t(id)];
    for (const SpecialToken& s : specials_)
        if (s.id == id) return s.text;
    throw IndexError(fmt::format("Tokenizer: {} is no token ID: valid are [0, {}){}", id, vocab_.size(),
                                        specials_.empty() ? "" : " and the special tokens' IDs"));
}

// ---- encoding --------------------------------------------------------------------------------
// One chunk, the lesson's way (minbpe's _encode_chunk): while an adjacent pair is a merge,
// replace every occurrence of the pair with the lowest rank (the earliest merge), left to right.
// A chunk of n bytes takes up to n − 1 rounds of O(n) each.
TokenIds Tokenizer::encode_chunk_lesson(std::string_view chunk) const {
    check_not_moved_from("encode_chunk_lesson");
    TokenIds ids(chunk.begin(), chunk.end());
    for (TokenId& id : ids) id = static_cast<unsigned char>(id);  // bytes 0..255, not signed chars
    while (ids.size() >= 2) {
        TokenId best = std::numeric_limits<TokenId>::max();
        for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
            const auto it = rank_.find(key(ids[i], ids[i + 1]));
            if (it != rank_.end()) best = std::min(best, it->second);
        }
        if (best == std::numeric_limits<TokenId>::max()) break;  // no pair is a merge
        const Pair pair = merges_[std::size_t(best - kBytes)];
        std::size_t out = 0;
        for (std::size_t i = 0; i < ids.size(); ++out) {
            if (i + 1 < ids.size() && ids[i] == pair.left && ids[i + 1] == pair.right) {
                ids[out] = best;
                i += 2;
            } else {
                ids[out] = ids[i++];
            }
        }
        ids.resize(out);
    }
    return ids;
}

// The same IDs in O(n log n): the tokens form a linked list, and a min-heap holds (rank, position)
// of every adjacent pair that is a merge. The top is the lowest rank at the leftmost position,
// so the occurrences of one merge are taken left to right as in the lesson; a merge makes pairs
// with the new token only, whose ranks are higher (a merge can use a token only after it exists),
// so every occurrence of a rank is merged before any higher rank. An entry whose pair has
// changed since it was pushed (a neighbour was merged away) is skipped when it comes up.
TokenIds Tokenizer::encode_chunk_heap(std::string_view chunk) const {
    check_not_moved_from("encode_chunk_heap");
    const std::size_t n = chunk.size(), end = n;  // `end`: no next token
    TokenIds ids(n);
    std::vector<std::size_t> prev(n), next(n);
    for (std::size_t i = 0; i < n; ++i)
        ids[i] = static_cast<unsigned char>(chunk[i]), prev[i] = i - 1, next[i] = i + 1;  // prev[0] wraps: none
    const auto rank_at = [&](std::size_t i) {  // the merge of the pair starting at token i, or −1
        if (next[i] == end) return TokenId(-1);
        const auto it = rank_.find(key(ids[i], ids[next[i]]));
        return it == rank_.end() ? TokenId(-1) : it->second;
    };
    using Entry = std::pair<TokenId, std::size_t>;  // (rank, position)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (std::size_t i = 0; i + 1 < n; ++i)
        if (const TokenId r = rank_at(i); r >= 0) heap.push({r, i});
    std::vector<bool> alive(n, true);
    while (!heap.empty()) {
        const auto [r, i] = heap.top();
        heap.pop();
        if (!alive[i] || rank_at(i) != r) continue;  // stale
        const std::size_t j = next[i];               // token i absorbs token j
        ids[i] = r;
        alive[j] = false;
        next[i] = next[j];
        if (next[j] != end) prev[next[j]] = i;
        // New pairs: the one ending at i (if a token precedes it) and the one starting at i.
        if (const std::size_t p = prev[i]; p < n)
            if (const TokenId rp = rank_at(p); rp >= 0) heap.push({rp, p});
        if (const TokenId rn = rank_at(i); rn >= 0) heap.push({rn, i});
    }
    TokenIds out;
    for (std::size_t i = 0; i < n; i = next[i]) out.push_back(ids[i]);
    return out;
}

// The choice: short chunks (almost every word) go the lesson's way, which allocates less; a long
// one (a line without spaces, a run of one letter) goes through the heap, whose cost grows as
// n log n rather than as n times the merges it applies. Both give the same IDs
// (tests/text/test_tokenizer.cpp holds them equal).
TokenIds Tokenizer::encode_chunk(std::string_view chunk) const {
    check_not_moved_from("encode_chunk");
    constexpr std::size_t kHeapFrom = 32;  // bytes
    return chunk.size() < kHeapFrom ? encode_chunk_lesson(chunk) : encode_chunk_heap(chunk);
}

// Ordinary text: split into chunks, encode each. A text repeats its words, so each distinct
// chunk is encoded once per call and its IDs copied from then on.
void Tokenizer::encode_text(std::string_view text, TokenIds& ids, ChunkCache& seen) const {
    for (std::string_view chunk : splitter_.split(text)) {
        const auto [it, inserted] = seen.try_emplace(chunk);
        if (inserted) {
            const TokenIds chunk_ids = encode_chunk(chunk);
            it->second = {ids.size(), ids.size() + chunk_ids.size()};
            ids.insert(ids.end(), chunk_ids.begin(), chunk_ids.end());
        } else {
            const auto [begin, end] = it->second;
            for (std::size_t i = begin; i < end; ++i) ids.push_back(ids[i]);
        }
    }
}

TokenIds Tokenizer::encode_text(std::string_view text) const {
    TokenIds ids;
    ids.reserve(text.size() / 3);
    ChunkCache seen;
    encode_text(text, ids, seen);
    return ids;
}

TokenIds Tokenizer::encode_ordinary(std::string_view text) const {
    check_not_moved_from("encode_ordinary");
    return encode_text(text);
}

TokenIds Tokenizer::encode(std::string_view text, Special allowed) const {
    check_not_moved_from("encode");
    if (specials_.empty() || allowed == Special::none) return encode_text(text);
    if (allowed == Special::none_raise) {
        for (const SpecialToken& s : specials_)
            if (const std::size_t at = text.find(s.text); at != std::string_view::npos)
                throw ValueError(fmt::format(
                    "encode: the text contains the special token {:?} at byte {}; pass Special::all to encode it as "
                    "ID {}, or Special::none to encode it as ordinary text",
                    s.text, at, s.id));
        return encode_text(text);
    }
    // Special::all: the text between special tokens is ordinary; at one position the first
    // registered special token that matches wins (as Python's re.split with their alternation).
    // next[s] is where special token s next occurs at or after `from` (found again only once
    // `from` has passed it), so the text is searched once per token, not once per match.
    TokenIds ids;
    ids.reserve(text.size() / 3);
    ChunkCache seen;  // one cache for all the ordinary pieces
    std::vector<std::size_t> next;
    for (const SpecialToken& s : specials_) next.push_back(text.find(s.text));
    std::size_t from = 0;
    while (true) {
        std::size_t at = std::string_view::npos;
        const SpecialToken* found = nullptr;
        for (std::size_t s = 0; s < specials_.size(); ++s) {
            if (next[s] != std::string_view::npos && next[s] < from) next[s] = text.find(specials_[s].text, from);
            if (next[s] < at) at = next[s], found = &specials_[s];
        }
        encode_text(text.substr(from, found ? at - from : std::string_view::npos), ids, seen);
        if (!found) break;
        ids.push_back(found->id);
        from = at + found->text.size();
    }
    return ids;
}

std::string Tokenizer::decode(const TokenIds& ids) const {
    check_not_moved_from("decode");
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const TokenId id = ids[i];
        if (id >= 0 && id < TokenId(vocab_.size())) {
            out += vocab_[std::size_t(id)];
            continue;
        }
        const auto s = std::find_if(specials_.begin(), specials_.end(), [id](const SpecialToken& t) { return t.id == id; });
        if (s == specials_.end())
            throw IndexError(fmt::format("decode: ids[{}] = {} is no token ID: valid are [0, {}){}", i, id,
                                                vocab_.size(), specials_.empty() ? "" : " and the special tokens' IDs"));
        out += s->text;
    }
    return out;
}

bool Tokenizer::operator==(const Tokenizer& o) const {
    check_not_moved_from("operator==");
    o.check_not_moved_from("operator==");
    const auto same_special = [](const SpecialToken& a, const SpecialToken& b) { return a.id == b.id && a.text == b.text; };
    return merges_ == o.merges_ && pattern() == o.pattern() && specials_.size() == o.specials_.size() &&
           std::equal(specials_.begin(), specials_.end(), o.specials_.begin(), same_special);
}

// ---- the file --------------------------------------------------------------------------------
namespace {

std::string crc_line(std::string_view body) {
    return fmt::format("crc32 {:08x}\n", xgrad::io::crc32(body));
}

[[noreturn]] void fail(const std::string& path, std::size_t line, const std::string& what) {
    throw ValueError(fmt::format("Tokenizer::load: {} line {}: {}", path, line, what));
}

}  // namespace

std::string Tokenizer::to_text() const {
    check_not_moved_from("to_text");
    std::string text = fmt::format("{}\npattern {}\nmerges {}\n", kHeader, pattern(), merges_.size());
    for (const Pair& m : merges_) text += fmt::format("{} {}\n", m.left, m.right);
    text += fmt::format("specials {}\n", specials_.size());
    for (const SpecialToken& s : specials_) text += fmt::format("{} {}\n", s.id, s.text);
    return text;
}

std::string Tokenizer::identity() const {
    check_not_moved_from("identity");
    return fmt::format("bpe V {}: {} merges, FNV-1a {:016x}", n_vocab(), n_merges(), xgrad::io::fnv1a64(to_text()));
}

void Tokenizer::save(const std::string& path) const {
    check_not_moved_from("save");
    if (pattern().find_first_of("\r\n") != std::string::npos)
        throw ValueError(fmt::format("Tokenizer::save: {}: the split pattern holds a line break, which the "
                                             "one-line field cannot store",
                                             path));
    std::string body = to_text();
    body += crc_line(body);

    xgrad::io::write_file_atomically(path, body, "Tokenizer::save");  // whole or not at all, through symlinks
}

Tokenizer Tokenizer::load(const std::string& path) {
    // A FIFO would block open(2) until a writer comes, a device may never end: only regular files.
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
        throw std::runtime_error(fmt::format("Tokenizer::load: {} is not a regular file (a directory, FIFO, device or "
                                             "socket)",
                                             path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("Tokenizer::load: cannot open {}: {}", path, std::strerror(errno)));
    std::string bytes;
    char buffer[1 << 16];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
        bytes.append(buffer, std::size_t(in.gcount()));
        if (bytes.size() > kMaxFileBytes)
            throw ValueError(fmt::format("Tokenizer::load: {} is larger than {} MiB: not a tokenizer file", path,
                                         kMaxFileBytes >> 20));
    }
    if (in.bad()) throw std::runtime_error(fmt::format("Tokenizer::load: cannot read {}", path));

    // The checksum first: the last line covers every byte before it.
    const std::size_t last = bytes.size() >= 2 ? bytes.rfind('\n', bytes.size() - 2) : std::string::npos;
    const std::string_view body = std::string_view(bytes).substr(0, last == std::string::npos ? 0 : last + 1);
    if (last == std::string::npos || bytes.compare(last + 1, std::string::npos, crc_line(body)) != 0)
        fail(path, std::size_t(std::count(body.begin(), body.end(), '\n')) + 1,
             "the checksum line is missing or does not match the file (damaged or edited)");

    std::istringstream lines{std::string(body)};
    std::string line;
    std::size_t n = 0;
    const auto next = [&](const char* what) -> std::string& {
        if (!std::getline(lines, line)) fail(path, n + 1, fmt::format("the file ends before {}", what));
        ++n;
        return line;
    };
    const auto field = [&](const char* name) {  // "<name> <rest>" → rest
        const std::string& l = next(name);
        const std::string prefix = std::string(name) + " ";
        if (l.compare(0, prefix.size(), prefix) != 0) fail(path, n, fmt::format("expected \"{}…\"", prefix));
        return l.substr(prefix.size());
    };
    const auto count = [&](const std::string& text, const char* name) {
        std::size_t used = 0;
        long long v = -1;
        try { v = std::stoll(text, &used); } catch (const std::exception&) {}
        if (used != text.size() || v < 0 || v > (1 << 24)) fail(path, n, fmt::format("{} count {:?} is not in [0, 2^24]", name, text));
        return std::size_t(v);
    };
    // What the constructor and register_special_tokens refuse, refused on the line that holds it.
    const auto on_this_line = [&](const auto& step) {
        try {
            step();
        } catch (const ValueError& e) {
            fail(path, n, e.what());
        }
    };
    if (next("the header") != kHeader) fail(path, n, fmt::format("expected \"{}\": not an xgrad tokenizer file", kHeader));
    Tokenizer t;
    const std::string pattern = field("pattern");
    on_this_line([&] { t = Tokenizer({}, pattern); });
    const std::size_t n_merges = count(field("merges"), "merges");
    for (std::size_t i = 0; i < n_merges; ++i) {
        Pair m;
        std::istringstream l(next("the last merge"));
        if (!(l >> m.left >> m.right) || !(l >> std::ws).eof()) fail(path, n, "expected \"<left> <right>\"");
        on_this_line([&] { t.add_merge(m); });
    }
    const std::size_t n_specials = count(field("specials"), "specials");
    for (std::size_t i = 0; i < n_specials; ++i) {
        SpecialToken s;
        std::istringstream l(next("the last special token"));
        if (!(l >> s.id >> s.text) || !(l >> std::ws).eof()) fail(path, n, "expected \"<id> <text>\"");
        on_this_line([&] { t.register_special_tokens({s}); });
    }
    if (std::getline(lines, line)) fail(path, n + 1, "unexpected line after the special tokens");
    return t;
}

}  // namespace xgrad::text
