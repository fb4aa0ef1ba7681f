// tests/text/test_split.cpp — text/split: a text's chunks under GPT-2's and GPT-4's patterns.
//
//   * the chunks Python's regex.findall gives (tests/reference/bpe_reference.json, written by
//     tests/reference/make_bpe_reference.py): the KJV's opening verses, minbpe's strings,
//     contractions, digit runs, whitespace runs, and Unicode whitespace, numbers, marks and
//     control characters, where two regex engines could disagree;
//   * hand-made chunks: the header's example, the two patterns on one string;
//   * nothing lost: the chunks concatenate to the text, also for invalid UTF-8 (what no match
//     covers is a chunk of its own) and for patterns that leave characters out;
//   * long matches: a linear pattern on a run of 1 MB; a pattern that backtracks exponentially,
//     refused with its name, the text's length and the way out;
//   * several threads splitting with one Splitter; copies; a moved-from Splitter, which throws;
//   * a pattern that does not compile.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/core/error.hpp>
#include <xgrad/text/split.hpp>
#include "test_helpers.hpp"
#include "text/bpe_reference.hpp"

using Catch::Matchers::Contains;

namespace xgrad::text::split_tests {

std::vector<std::string> chunks_of(const Splitter& splitter, std::string_view text) {
    const std::vector<std::string_view> views = splitter.split(text);
    return std::vector<std::string>(views.begin(), views.end());
}

std::string concatenated(const std::vector<std::string_view>& chunks) {
    std::string out;
    for (std::string_view c : chunks) out += c;
    return out;
}

TEST_CASE("text/split: the chunks of Python's regex.findall, GPT-4's and GPT-2's patterns", "[text]") {
    const Splitter gpt4(std::string{kGpt4Pattern}), gpt2(std::string{kGpt2Pattern});
    const nlohmann::json& cases = testing::bpe::reference().at("split");
    REQUIRE(cases.size() >= 19);
    for (const nlohmann::json& c : cases) {
        const std::string text = c.at("text").get<std::string>();
        INFO("text: " << text);
        CHECK(chunks_of(gpt4, text) == c.at("gpt4").get<std::vector<std::string>>());
        CHECK(chunks_of(gpt2, text) == c.at("gpt2").get<std::vector<std::string>>());
    }
}

TEST_CASE("text/split: the header's example and the two patterns on contractions and digits", "[text]") {
    const Splitter gpt4, gpt2(std::string{kGpt2Pattern});
    CHECK(gpt4.pattern() == kGpt4Pattern);  // the default
    CHECK(chunks_of(gpt4, "In the beginning, God") ==
          std::vector<std::string>{"In", " the", " beginning", ",", " God"});
    // GPT-4: contractions in any case, numbers in runs of at most 3 digits, the space before a
    // number a chunk of its own. GPT-2: lower-case contractions only, a number with its space.
    CHECK(chunks_of(gpt4, "I'LL pay 12345") == std::vector<std::string>{"I", "'LL", " pay", " ", "123", "45"});
    CHECK(chunks_of(gpt2, "I'LL pay 12345") == std::vector<std::string>{"I", "'", "LL", " pay", " 12345"});
    // Whitespace before a word: all but its last space, which goes with the word.
    CHECK(chunks_of(gpt4, "a   b\n\nc") == std::vector<std::string>{"a", "  ", " b", "\n\n", "c"});
    CHECK(gpt4.split("").empty());
}

TEST_CASE("text/split: invalid UTF-8 is never matched and becomes chunks of its own", "[text]") {
    const Splitter gpt4;
    // 0xFF and 0xFE never occur in UTF-8; 0xC3 must be followed by a continuation byte.
    CHECK(chunks_of(gpt4, "ab\xFF\xFE" "cd") == std::vector<std::string>{"ab", "\xFF\xFE", "cd"});
    CHECK(chunks_of(gpt4, "\xC3") == std::vector<std::string>{"\xC3"});
    CHECK(chunks_of(gpt4, "\xC3\xA9t\xC3\xA9") == std::vector<std::string>{"\xC3\xA9t\xC3\xA9"});  // "été", valid
}

TEST_CASE("text/split: the chunks of random bytes concatenate to the bytes", "[text]") {
    const Splitter gpt4, gpt2(std::string{kGpt2Pattern});
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<int> byte(0, 255), length(0, 600);
    for (int trial = 0; trial < 200; ++trial) {
        std::string text(std::size_t(length(rng)), '\0');
        for (char& c : text) c = char(byte(rng));
        for (const Splitter* s : {&gpt4, &gpt2}) {
            const std::vector<std::string_view> chunks = s->split(text);
            REQUIRE(concatenated(chunks) == text);
            for (std::string_view c : chunks) REQUIRE_FALSE(c.empty());
        }
    }
}

TEST_CASE("text/split: what a pattern does not cover is kept, in order", "[text]") {
    // Python's findall would give only "aa" (it drops what no match covers); the split keeps all.
    CHECK(chunks_of(Splitter("a+"), "baab") == std::vector<std::string>{"b", "aa", "b"});
    CHECK(chunks_of(Splitter("z"), "abc") == std::vector<std::string>{"abc"});
}

TEST_CASE("text/split: empty matches are skipped as Python's findall skips them", "[text]") {
    // regex.findall("x*", "abxxc") == ["", "", "xx", "", ""]: one match that is not empty, and
    // the text it does not cover, "ab" and "c", kept whole.
    CHECK(chunks_of(Splitter("x*"), "abxxc") == std::vector<std::string>{"ab", "xx", "c"});
    // After an empty match the next match may start at the same character if it is not empty:
    // regex.findall("x*|ab", "abab") == ["", "ab", "", "ab", ""],
    // regex.findall("(?=b)|b+", "abb") == ["", "bb"].
    CHECK(chunks_of(Splitter("x*|ab"), "abab") == std::vector<std::string>{"ab", "ab"});
    CHECK(chunks_of(Splitter("(?=b)|b+"), "abb") == std::vector<std::string>{"a", "bb"});
    // Invalid UTF-8 (0xE0 must be followed by two continuation bytes, not 'a'): the search moves
    // on by one byte there, by whole characters elsewhere, and no chunk ends inside "é".
    CHECK(chunks_of(Splitter("a*"), "\xE0" "ab") == std::vector<std::string>{"\xE0", "a", "b"});
    CHECK(chunks_of(Splitter("x*"), "\xE0" "a\xC3\xA9") == std::vector<std::string>{"\xE0" "a\xC3\xA9"});
    CHECK(chunks_of(Splitter("x*|\\p{L}"), "\xE0\xC3\xA9") == std::vector<std::string>{"\xE0", "\xC3\xA9"});
}

TEST_CASE("text/split: a whitespace run of 12 MiB splits as a short one does", "[text]") {
    // GPT-4's \s*[\r\n] gives back a run of spaces one at a time, looking for a line break, before
    // \s+(?!\S) takes the run: steps that PCRE2 counts against its match limit.
    const std::size_t n = std::size_t(12) << 20;
    const std::string text = std::string(n, ' ') + "x";
    const std::vector<std::string_view> chunks = Splitter().split(text);
    REQUIRE(chunks.size() == 2);
    CHECK(chunks[0].size() == n - 1);  // all but the last space, which goes with the word
    CHECK(chunks[1] == " x");
    CHECK(Splitter().split(std::string(n, '\t')).size() == 1);
}

TEST_CASE("text/split: a linear pattern matches a run of 300 KB and of 1 MB as one chunk", "[text][regression]") {
    // Each repetition of a group with alternatives leaves a backtracking point on the JIT's stack,
    // tens of bytes per byte matched: more than a fixed stack of 8 MiB holds for either run.
    const std::string a300k(300'000, 'a'), a1m(1'000'000, 'a');
    const std::vector<std::string_view> one = Splitter("(a|b)+").split(a300k);
    REQUIRE(one.size() == 1);
    CHECK(one[0].size() == a300k.size());
    const std::vector<std::string_view> letters = Splitter(R"((?:\p{L}|')+)").split(a1m);
    REQUIRE(letters.size() == 1);
    CHECK(letters[0].size() == a1m.size());
    // Two runs and what lies between them: the stack grown for the first serves the second.
    const std::string two = a1m + "--" + a1m;
    std::vector<std::size_t> sizes;
    for (std::string_view chunk : Splitter("(a|b)+").split(two)) sizes.push_back(chunk.size());
    CHECK(sizes == std::vector<std::size_t>{1'000'000, 2, 1'000'000});
}

TEST_CASE("text/split: a pattern that backtracks exponentially is refused naming it, the text's length and the way out",
          "[text][regression]") {
    // (x+x+)+y on x…xzy: before it fails at the z, (x+x+)+ tries every way to cut the run of
    // x's in parts, 2^39 for 40 x's; PCRE2 stops it at its match limit.
    const std::string text = std::string(40, 'x') + "zy";
    const std::string message = testing::message_of<ValueError>([&] { Splitter("(x+x+)+y").split(text); });
    CHECK_THAT(message, Contains("Splitter::split") && Contains("\"(x+x+)+y\"") && Contains("42 bytes") &&
                            Contains("from byte 0") && Contains("match limit") && Contains("possessive"));
}

TEST_CASE("text/split: several threads share one Splitter", "[text]") {
    const Splitter gpt4;
    const std::string& text = testing::bpe::excerpt();
    const std::vector<std::string_view> expected = gpt4.split(text);
    REQUIRE(expected.size() > 2000);
    std::vector<int> same(4, 0);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < same.size(); ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 10; ++round) same[t] += gpt4.split(text) == expected;
        });
    for (std::thread& t : threads) t.join();
    CHECK(same == std::vector<int>(4, 10));
}

TEST_CASE("text/split: a copy compiles the same pattern, a moved-to Splitter splits as the original", "[text]") {
    const Splitter gpt2(std::string{kGpt2Pattern});
    Splitter copy = gpt2;
    CHECK(copy.pattern() == kGpt2Pattern);
    CHECK(chunks_of(copy, "I'LL pay 12345") == chunks_of(gpt2, "I'LL pay 12345"));
    Splitter assigned;
    assigned = copy;
    Splitter moved = std::move(copy);
    CHECK(chunks_of(moved, "I'LL pay 12345") == chunks_of(gpt2, "I'LL pay 12345"));
    CHECK(chunks_of(assigned, "I'LL pay 12345") == chunks_of(gpt2, "I'LL pay 12345"));
}

TEST_CASE("text/split: a moved-from Splitter throws ValueError saying so, and splits once assigned again",
          "[text][regression]") {
    Splitter gpt2(std::string{kGpt2Pattern});
    const Splitter taker = std::move(gpt2);
    // NOLINTBEGIN(bugprone-use-after-move): the use after the move is what is tested
    CHECK(gpt2.moved_from());
    CHECK_FALSE(taker.moved_from());
    for (const auto& use : std::vector<std::function<void()>>{[&] { gpt2.split("I'LL pay"); },
                                                              [&] { (void)gpt2.pattern(); }}) {
        const std::string message = testing::message_of<ValueError>(use);
        CHECK_THAT(message, Contains("Splitter") && Contains("moved from"));
    }
    const Splitter copy = gpt2;  // a copy of a moved-from Splitter is one too
    CHECK(copy.moved_from());
    CHECK_THROWS_AS(copy.split("x"), ValueError);
    gpt2 = Splitter("a+");
    CHECK(chunks_of(gpt2, "baab") == std::vector<std::string>{"b", "aa", "b"});
    // NOLINTEND(bugprone-use-after-move)
    CHECK(chunks_of(taker, "I'LL pay") == std::vector<std::string>{"I", "'", "LL", " pay"});
}

TEST_CASE("text/split: a pattern that does not compile throws ValueError naming it", "[text]") {
    const std::string unbalanced = testing::message_of<ValueError>([] { Splitter("(?"); });
    CHECK_THAT(unbalanced, Contains("does not compile") && Contains("\"(?\""));
    CHECK_THAT(testing::message_of<ValueError>([] { Splitter(R"(\p{NoSuchProperty}+)"); }), Contains("NoSuchProperty"));
    CHECK_THAT(testing::message_of<ValueError>([] { Splitter("a{2,1}"); }), Contains("at byte"));
}

}  // namespace xgrad::text::split_tests
