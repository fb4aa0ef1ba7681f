// tests/text/test_render.cpp — text/render: ill-formed UTF-8 as U+FFFD (Python's
// errors="replace"), then minbpe's replace_control_characters, which escapes each character of
// Unicode category C as \uXXXX; here the line feed and the tab are kept. The categories below are
// Python's unicodedata.category (3.11): ESC, NUL, DEL, U+0085 Cc; U+00AD, U+200B, U+FEFF Cf;
// U+E000 Co; U+0378, U+10FFFF Cn; U+00E9 Ll, U+1F600 So, U+2028 Zl (not escaped).
#include <catch2/catch.hpp>

#include <string>

#include <xgrad/text/render.hpp>

using xgrad::text::render_text;
using xgrad::text::replace_invalid_utf8;

TEST_CASE("replace_invalid_utf8: ill-formed UTF-8 becomes U+FFFD, as Python's errors=\"replace\"", "[text][render]") {
    const std::string fffd = "\xEF\xBF\xBD", euro = "\xE2\x82\xAC";
    CHECK(replace_invalid_utf8("plain " + euro) == "plain " + euro);  // well-formed: unchanged
    CHECK(replace_invalid_utf8("a\x80" "b") == "a" + fffd + "b");      // a lone continuation byte
    CHECK(replace_invalid_utf8("\xE2\x82") == fffd);                  // a cut character: one U+FFFD
    CHECK(replace_invalid_utf8("\xE2\x82" "a") == fffd + "a");
    // b"\xed\xa0\x80".decode("utf-8", "replace") (a surrogate): 3 U+FFFD; b"\xc0\xaf" (overlong): 2.
    CHECK(replace_invalid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);
    CHECK(replace_invalid_utf8("\xC0\xAF") == fffd + fffd);
    CHECK(replace_invalid_utf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");  // 4 bytes: U+1F600
}

TEST_CASE("render_text: control characters escaped as minbpe's render_token writes them - lines and tabs kept",
          "[text][render][regression]") {
    using namespace std::string_literals;
    CHECK(render_text("\x1b[2J\x1b[31mred"s) == R"(\u001b[2J\u001b[31mred)");  // ESC: a terminal's commands
    CHECK(render_text("a\0b\x7f"s) == R"(a\u0000b\u007f)");                      // NUL, DEL
    CHECK(render_text("line 1\r\nline\t2\n") == "line 1\\u000d\nline\t2\n");      // CR escaped; LF, tab kept
    CHECK(render_text("\xC2\x85|\xC2\xAD|\xE2\x80\x8B|\xEF\xBB\xBF") == R"(\u0085|\u00ad|\u200b|\ufeff)");  // C1, Cf
    CHECK(render_text("\xEE\x80\x80|\xCD\xB8|\xF4\x8F\xBF\xBF") == R"(\ue000|\u0378|\u10ffff)");  // Co, Cn
    CHECK(render_text("caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x80\xA8") == "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x80\xA8");
    CHECK(render_text("\xFF\x1b") == "\xEF\xBF\xBD\\u001b");  // ill-formed first, then escaped
    CHECK(render_text("").empty());
}
