// examples/gpt/tokens.cpp — characters or byte pairs, the text's split, the tokenizer file beside
// a checkpoint, and the loss per character (see tokens.hpp).
#include "tokens.hpp"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/text/train.hpp>


namespace gpt {

namespace text = xgrad::text;

Tokens Tokens::characters(Vocab vocab) {
    Tokens t;
    for (char c : vocab.chars) t.bytes_.emplace_back(1, c);
    t.byte_counts_.assign(t.bytes_.size(), 1);
    t.chars_ = std::move(vocab);
    return t;
}

Tokens Tokens::byte_pairs(text::Tokenizer tokenizer) {
    Tokens t;
    t.bytes_.resize(std::size_t(tokenizer.n_vocab()));  // IDs between the merges and a special token: ""
    for (text::TokenId id = 0; id < tokenizer.vocab_size() - text::TokenId(tokenizer.special_tokens().size()); ++id)
        t.bytes_[std::size_t(id)] = tokenizer.bytes(id);
    for (const text::SpecialToken& s : tokenizer.special_tokens()) t.bytes_[std::size_t(s.id)] = s.text;
    for (const std::string& b : t.bytes_) t.byte_counts_.push_back(std::int64_t(b.size()));
    t.bpe_ = std::move(tokenizer);
    return t;
}

Ids Tokens::encode(const std::string& s) const {
    if (chars_) return chars_->encode(s);
    return bpe_->encode_ordinary(s);
}

std::string Tokens::decode(const Ids& ids) const {
    std::string s;
    for (std::int64_t id : ids) {
        if (id < 0 || id >= size())
            throw std::out_of_range(fmt::format("decode: id {} is outside [0, {})", id, size()));
        s += bytes_[std::size_t(id)];
    }
    return s;
}

const Vocab& Tokens::vocab() const {
    if (!chars_) throw std::logic_error("Tokens::vocab: the tokens are byte pairs, not characters");
    return *chars_;
}

const text::Tokenizer& Tokens::tokenizer() const {
    if (!bpe_) throw std::logic_error("Tokens::tokenizer: the tokens are characters, not byte pairs");
    return *bpe_;
}

std::string Tokens::fingerprint_vocab() const {
    if (chars_) return chars_->chars;
    std::string bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(char(b));
    return bytes;
}

std::string Tokens::identity() const {
    if (!bpe_) return "";
    return bpe_->identity();
}

TextSplit split_text(std::string_view s) {
    std::size_t cut = s.size() * 9 / 10;
    // A UTF-8 continuation byte is 10xxxxxx: step back to the byte that starts the character.
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return {s.substr(0, cut), s.substr(cut)};
}

text::Tokenizer train_bpe(std::string_view train, std::int64_t vocab_size) {
    try {
        return text::make_tokenizer(text::train(train, vocab_size));
    } catch (const xgrad::ValueError& e) {
        throw xgrad::ValueError(fmt::format("--vocab-size {}: {}", vocab_size, e.what()));
    }
}

std::string tokenizer_beside(const std::string& checkpoint) {
    return (std::filesystem::path(checkpoint).parent_path() / "tokenizer.bpe").string();
}

text::Tokenizer load_bpe_beside(const std::string& checkpoint, std::int64_t vocab_size, const std::string& flag) {
    const std::string path = tokenizer_beside(checkpoint);
    std::error_code ec;
    if (!std::filesystem::exists(checkpoint, ec))
        throw std::runtime_error(fmt::format("{} {}: no such file", flag, checkpoint));
    if (!std::filesystem::exists(path, ec))
        throw std::runtime_error(fmt::format("{} {}: no {} beside it, which a --tokenizer bpe run writes with its "
                                             "checkpoint (a --tokenizer char run writes none): give the checkpoint "
                                             "of a byte-pair run, or the --tokenizer of the run that wrote it",
                                             flag, checkpoint, path));
    text::Tokenizer tokenizer = [&] {
        try {
            return text::Tokenizer::load(path);
        } catch (const std::exception& e) {
            throw std::runtime_error(fmt::format("{} {}: {}", flag, checkpoint, e.what()));
        }
    }();
    if (tokenizer.n_vocab() != vocab_size && flag == "--checkpoint")  // gpt_sample: the size is the checkpoint's own
        throw std::runtime_error(fmt::format("{} {}: its tokenizer {} has {} tokens, but the checkpoint records "
                                             "--vocab-size {}: the tokenizer.bpe beside it is another run's",
                                             flag, checkpoint, path, tokenizer.n_vocab(), vocab_size));
    if (tokenizer.n_vocab() != vocab_size)
        throw std::runtime_error(fmt::format("{} {}: its tokenizer {} has {} tokens, but this run has --vocab-size "
                                             "{}: pass --vocab-size {}",
                                             flag, checkpoint, path, tokenizer.n_vocab(), vocab_size,
                                             tokenizer.n_vocab()));
    return tokenizer;
}

Split split_tokens(Ids train, Ids val, int block, const std::string& source) {
    const std::size_t window = std::size_t(block) + 1;
    if (train.size() < window || val.size() < window)
        throw std::runtime_error(fmt::format(
            "{}: the text gives train {} and validation {} tokens (the last 10%), but each needs at least one window "
            "of block + 1 = {} tokens; give a longer text, a smaller --block-size or a smaller --vocab-size",
            source, train.size(), val.size(), window));
    return {std::move(train), std::move(val)};
}

void LossSum::add(double mean_nats, const xgrad::IndexTensor& y, const std::vector<std::int64_t>& byte_counts) {
    const std::int64_t n = y.numel();
    nats += mean_nats * double(n);
    tokens += n;
    if (byte_counts.empty()) {
        bytes += n;
        return;
    }
    const std::int64_t* ids = y.data().data();
    for (std::int64_t i = 0; i < n; ++i) bytes += byte_counts.at(std::size_t(ids[i]));
}

}  // namespace gpt
