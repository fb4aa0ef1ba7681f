// data/vocab.cpp — CharVocab: bytes ↔ ids by the rank of each byte in the sorted set.
#include <xgrad/data/vocab.hpp>

#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>

namespace xgrad::data {

std::array<std::int16_t, 256> CharVocab::no_ids() {
    std::array<std::int16_t, 256> none;
    none.fill(-1);
    return none;
}

CharVocab CharVocab::from_text(const std::string& text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    CharVocab v;
    for (int c = 0; c < 256; ++c)
        if (seen[std::size_t(c)]) {
            v.id[std::size_t(c)] = std::int16_t(v.chars.size());
            v.chars.push_back(char(c));
        }
    return v;
}

std::vector<std::int64_t> CharVocab::encode(const std::string& text) const {
    std::vector<std::int64_t> ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const std::int16_t k = id[static_cast<unsigned char>(text[i])];
        if (k < 0)
            throw std::runtime_error(fmt::format("encode: character {:?} (byte {}) at position {} is not in the "
                                                 "vocabulary of {} characters",
                                                 std::string(1, text[i]), int(static_cast<unsigned char>(text[i])), i,
                                                 chars.size()));
        ids[i] = k;
    }
    return ids;
}

std::string CharVocab::decode(const std::vector<std::int64_t>& ids) const {
    std::string s;
    s.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= size())
            throw IndexError(fmt::format("decode: id {} at position {} out of range [0, {})", ids[i], i, size()));
        s.push_back(chars[std::size_t(ids[i])]);
    }
    return s;
}

}  // namespace xgrad::data
