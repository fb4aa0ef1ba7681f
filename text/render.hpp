// text/render.hpp — text as a terminal may show it: minbpe's render_token (base.py) for whole
// texts, such as a model's samples, which may hold any byte a token stands for.
#pragma once

#include <string>
#include <string_view>

namespace xgrad::text {

// `bytes` with every ill-formed UTF-8 sequence replaced by U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace") does (one U+FFFD per maximal ill-formed subpart,
// Unicode 15, section 3.9): a sample of byte-pair tokens may end a character early or hold a
// byte token the text never had. Well-formed text comes back unchanged.
std::string replace_invalid_utf8(std::string_view bytes);

// replace_invalid_utf8(bytes), then every character of Unicode general category C but the line
// feed and the tab (Cc controls such as NUL, ESC and CR; Cf format, Co private use, Cn unassigned)
// written as \u and its code point in lowercase hex, at least 4 digits: "\x1b[2J" → "\u001b[2J",
// U+200B → "\u200b". As minbpe's replace_control_characters, which escapes '\n' and '\t' too: a
// text's lines and tabs are kept. The categories are PCRE2's \p{C} (its Unicode version).
std::string render_text(std::string_view bytes);

}  // namespace xgrad::text
