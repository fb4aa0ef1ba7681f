// text/render.cpp — ill-formed UTF-8 and control characters made visible (render.hpp).
#include "render.hpp"

#include <cstdint>
#include <memory>
#include <new>

#include <fmt/format.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace xgrad::text {

std::string replace_invalid_utf8(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const unsigned char lead = static_cast<unsigned char>(s[i]);
        // The sequence's length from its lead byte (0: no sequence starts with it), and the range
        // of its second byte (Unicode's table 3-7: no overlong forms, surrogates or code points
        // above U+10FFFF).
        std::size_t n = lead < 0x80 ? 1 : lead < 0xC2 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF5 ? 4 : 0;
        const unsigned char lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
        const unsigned char hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
        std::size_t k = 1;  // the bytes of the sequence that are well-formed so far
        for (; k < n && i + k < s.size(); ++k) {
            const unsigned char b = static_cast<unsigned char>(s[i + k]);
            if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
        }
        if (n > 0 && k == n) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += "\xEF\xBF\xBD";  // U+FFFD for the ill-formed part
            i += k;
        }
    }
    return out;
}

namespace {

// The code point of the well-formed UTF-8 sequence `c` (1 to 4 bytes).
std::uint32_t code_point(std::string_view c) {
    const auto byte = [&](std::size_t i) { return std::uint32_t(static_cast<unsigned char>(c[i])); };
    if (c.size() == 1) return byte(0);
    std::uint32_t cp = byte(0) & (0x7Fu >> c.size());  // the lead byte's payload bits
    for (std::size_t i = 1; i < c.size(); ++i) cp = (cp << 6) | (byte(i) & 0x3F);
    return cp;
}

// One character of category C other than '\n' and '\t'; compiled once, for every thread.
const pcre2_code* control_character() {
    static const std::unique_ptr<pcre2_code, void (*)(pcre2_code*)> code = [] {
        const std::string_view pattern = R"((?![\n\t])\p{C})";
        int error = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF,
                                      &error, &offset, nullptr);
        if (!c) throw std::bad_alloc();  // a constant pattern: only memory can fail
        return std::unique_ptr<pcre2_code, void (*)(pcre2_code*)>(c, pcre2_code_free);
    }();
    return code.get();
}

}  // namespace

std::string render_text(std::string_view bytes) {
    const std::string text = replace_invalid_utf8(bytes);
    const pcre2_code* pattern = control_character();
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
        pcre2_match_data_create_from_pattern(pattern, nullptr), pcre2_match_data_free);
    if (!match) throw std::bad_alloc();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::string out;
    std::size_t from = 0;  // text[0, from) is in out
    // Well-formed by now: PCRE2 need not check the UTF-8 again at each match.
    while (pcre2_match(pattern, subject, text.size(), from, PCRE2_NO_UTF_CHECK, match.get(), nullptr) > 0) {
        const PCRE2_SIZE* at = pcre2_get_ovector_pointer(match.get());  // the character: text[at[0], at[1])
        out.append(text, from, at[0] - from);
        out += fmt::format("\\u{:04x}", code_point(std::string_view(text).substr(at[0], at[1] - at[0])));
        from = at[1];
    }
    out.append(text, from, std::string::npos);
    return out;
}

}  // namespace xgrad::text
