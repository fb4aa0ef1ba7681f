// core/parse.hpp — strict text → number conversion, for every number xgrad reads back from a
// file (optimizer state, checkpoint metadata).
//
// "Strict": the whole text is the number, in one spelling (std::from_chars):
//   integer   an optional '-' then decimal digits: "12", "-3"
//   real      decimal or scientific: "0.001", "1e-08", "-2.5", "inf", "nan" (callers check finiteness)
// Refused: spaces, a leading '+', trailing characters ("5abc", which std::stoi reads as 5), "0x10",
// "1e3" as an integer, "", and values out of range ("1e400"). What xgrad writes
// (std::to_string, fmt::format("{}", double)) always reads back to the same value.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <xgrad/core/error.hpp>

namespace xgrad {

// The value, or nullopt if `text` is not exactly one decimal integer in range.
inline std::optional<std::int64_t> try_parse_int64(std::string_view text) {
    std::int64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return v;
}

// The value, or nullopt if `text` is not exactly one real number representable as a double.
inline std::optional<double> try_parse_double(std::string_view text) {
    double v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return v;
}

// `text` for an error message: quoted, non-printable bytes as \xNN, cut after 40 bytes.
inline std::string quoted_text(std::string_view text) {
    std::string out = "'";
    for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
        else out += fmt::format("\\x{:02x}", c);
    }
    if (text.size() > 40) out += fmt::format("... ({} bytes)", text.size());
    return out + "'";
}

// The integer in `text`, which must lie in [lo, hi]. Throws ValueError naming `op`, `key` and
// the text, e.g. "Adam.load_state_dict: 'w.step' = '5abc' is not a decimal integer".
inline std::int64_t parse_int64(std::string_view text, const char* op, std::string_view key,
                                std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX) {
    const std::optional<std::int64_t> v = try_parse_int64(text);
    check(v.has_value(), op, "'{}' = {} is not a decimal integer (digits with an optional leading '-', "
          "in the range of a 64-bit integer)", key, quoted_text(text));
    check(*v >= lo && *v <= hi, op, "'{}' = {} is outside [{}, {}]", key, quoted_text(text), lo, hi);
    return *v;
}

// The real number in `text` (may be inf or nan: check finiteness where it matters). Throws
// ValueError naming `op`, `key` and the text.
inline double parse_double(std::string_view text, const char* op, std::string_view key) {
    const std::optional<double> v = try_parse_double(text);
    check(v.has_value(), op, "'{}' = {} is not a decimal number (such as 0.001 or 1e-08; no '+', "
          "spaces, hexadecimal or trailing characters)", key, quoted_text(text));
    return *v;
}

}  // namespace xgrad
