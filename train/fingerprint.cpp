// train/fingerprint.cpp — the data fingerprint and its comparison (see fingerprint.hpp).
#include <xgrad/train/fingerprint.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>
#include <xgrad/io/checksum.hpp>

namespace xgrad::train {

namespace {
const std::string kVocab = "data.vocab_hex", kTextBytes = "data.text_bytes", kTextHash = "data.text_fnv1a64";
const std::string kTokenizer = "data.tokenizer";

// The bytes of "0041ff" (two lowercase hex digits per byte), or nullopt for any other text.
std::optional<std::string> from_hex(const std::string& hex) {
    auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    if (hex.size() % 2 != 0) return std::nullopt;
    std::string bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        bytes.push_back(static_cast<char>(hi * 16 + lo));
    }
    return bytes;
}

// The value of a data.* key; throws if it is missing.
std::string data_key(const std::string& path, const nn::Metadata& saved, const std::string& key) {
    auto it = saved.find(key);
    if (it == saved.end())
        throw std::runtime_error(fmt::format("{}: the checkpoint records no vocabulary ('{}' missing), so its token "
                                             "ids cannot be checked against this run's text; train afresh",
                                             path, key));
    return it->second;
}

}  // namespace

std::string saved_vocabulary(const std::string& path, const nn::Metadata& saved) {
    const std::string hex = data_key(path, saved, kVocab);
    const std::optional<std::string> vocab = from_hex(hex);
    if (!vocab)
        throw std::runtime_error(fmt::format("{}: '{}' = {} is not a vocabulary (two lowercase hex digits per byte)",
                                             path, kVocab, quoted_text(hex)));
    return *vocab;
}

namespace {

// Refuses a saved vocabulary other than `now` (V bytes, id i = byte i); `advice` ends the message.
void check_same_vocab(const std::string& path, const nn::Metadata& saved, const std::string& now,
                      const std::string& advice) {
    const std::string vocab = saved_vocabulary(path, saved);
    if (vocab == now) return;
    const auto at = std::mismatch(vocab.begin(), vocab.end(), now.begin(), now.end());
    const std::size_t id = std::size_t(at.first - vocab.begin());
    auto byte = [&](const std::string& v) { return id < v.size() ? quoted_text(v.substr(id, 1)) : std::string("nothing"); };
    throw std::runtime_error(fmt::format(
        "{}: vocabulary mismatch: the checkpoint was trained on a vocabulary of {} bytes, this run's text has one of {}; "
        "token id {} meant {} and would now mean {}. Every id must mean the character the weights learnt: {}",
        path, vocab.size(), now.size(), id, byte(vocab), byte(now), advice));
}

// Refuses a saved text of another length or hash than `now`'s.
void check_same_text(const std::string& path, const nn::Metadata& saved, const TextFingerprint& now) {
    const std::string bytes = data_key(path, saved, kTextBytes), hash = data_key(path, saved, kTextHash);
    const std::string bytes_now = std::to_string(now.text_bytes), hash_now = fmt::format("{:016x}", now.text_fnv1a);
    if (bytes != bytes_now || hash != hash_now)
        throw std::runtime_error(fmt::format(
            "{}: text mismatch: the checkpoint was trained on a text of {} bytes with FNV-1a hash {}, this run's text has "
            "{} bytes with hash {} (the same vocabulary). The resumed run would not continue the saved one: resume on "
            "the text the checkpoint was trained on",
            path, bytes, hash, bytes_now, hash_now));
}

// Refuses a saved tokenizer other than `now` ("" for one byte per token, as a file without the key).
void check_same_tokenizer(const std::string& path, const nn::Metadata& saved, const std::string& now,
                          const std::string& advice) {
    const auto it = saved.find(kTokenizer);
    const std::string before = it == saved.end() ? "" : it->second;
    auto name = [](const std::string& t) { return t.empty() ? std::string("one byte per token") : "'" + t + "'"; };
    if (before != now)
        throw std::runtime_error(fmt::format("{}: tokenizer mismatch: the checkpoint's ids are those of {}, this run's "
                                             "of {}; the ids above the bytes would mean other text: {}",
                                             path, name(before), name(now), advice));
}
}  // namespace

TextFingerprint fingerprint(const std::string& vocab, const std::string& text) {
    return {vocab, text.size(), io::fnv1a64(text), ""};
}

nn::Metadata fingerprint_metadata(const TextFingerprint& data) {
    std::string hex;
    for (unsigned char b : data.vocab) hex += fmt::format("{:02x}", b);
    nn::Metadata meta{{kVocab, hex}, {kTextBytes, std::to_string(data.text_bytes)},
                      {kTextHash, fmt::format("{:016x}", data.text_fnv1a)}};
    if (!data.tokenizer.empty()) meta[kTokenizer] = data.tokenizer;
    return meta;
}

void check_same_data(const std::string& path, const nn::Metadata& saved, const TextFingerprint& now, bool resume) {
    check_same_vocab(path, saved, now.vocab,
                     resume ? "resume on the text the checkpoint was trained on"
                            : "train on a text with the same characters");
    if (resume) check_same_text(path, saved, now);
    check_same_tokenizer(path, saved, now.tokenizer,
                         resume ? "resume with the tokenizer the checkpoint was trained with"
                                : "start from the tokenizer the checkpoint was trained with");
}

}  // namespace xgrad::train
