// tests/text/test_tokenizer.cpp — text/tokenizer: encode, decode, special tokens, bad input.
// The tokenizer's file (save, load) is tested in test_tokenizer_file.cpp.
//
//   * the IDs of minbpe's algorithm (tests/reference/bpe_reference.json, written by
//     tests/reference/make_bpe_reference.py) with the merges learned on the KJV excerpt: minbpe's
//     strings, verses from later books, contractions, digits, whitespace runs, the excerpt itself;
//     and a text with special tokens, encoded with all of them allowed;
//   * by hand: Wikipedia's "aaabdaaabac" merge by merge (the header's example), special tokens;
//   * minbpe's identity test: decode(encode(x)) == x for its strings, untrained and trained;
//   * a fuzz test: decode(encode(x)) == x for random byte strings, valid UTF-8 or not, and for the
//     whole KJV when the `bible` program is installed (.ci/install-deps);
//   * bad input: unknown IDs, special tokens refused by register_special_tokens, merges refused by
//     the constructor, a special token's text under Special::none_raise; a moved-from Tokenizer.
//
// Legend: V vocabulary size (256 + M merges + S special tokens).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/core/error.hpp>
#include <xgrad/text/tokenizer.hpp>
#include <xgrad/data/text_source.hpp>
#include "test_helpers.hpp"
#include "text/bpe_reference.hpp"

using Catch::Matchers::Contains;

namespace xgrad::text::tokenizer_tests {

using testing::message_of;
namespace bpe = testing::bpe;

// The IDs of the bytes of `s`, no merges: what an untrained tokenizer gives.
TokenIds byte_ids(const std::string& s) {
    TokenIds ids;
    for (char c : s) ids.push_back(static_cast<unsigned char>(c));
    return ids;
}

TEST_CASE("text/tokenizer: the IDs of minbpe's algorithm with the merges learned on the KJV excerpt", "[text]") {
    const Tokenizer& t = bpe::excerpt_tokenizer();
    REQUIRE(t.n_merges() == 256);
    REQUIRE(t.vocab_size() == 512);
    const nlohmann::json& cases = bpe::reference().at("encodings");
    REQUIRE(cases.size() >= 12);
    for (const nlohmann::json& c : cases) {
        const std::string text = c.at("text").get<std::string>();
        const TokenIds ids = c.at("ids").get<TokenIds>();
        INFO("text: " << text);
        CHECK(t.encode(text) == ids);
        CHECK(t.encode_ordinary(text) == ids);
        CHECK(t.decode(ids) == text);
    }
    const TokenIds excerpt_ids = bpe::reference().at("excerpt_ids").get<TokenIds>();
    CHECK(t.encode(bpe::excerpt()) == excerpt_ids);
    CHECK(t.decode(excerpt_ids) == bpe::excerpt());
}

TEST_CASE("text/tokenizer: a text with special tokens, all allowed, as minbpe encodes it", "[text]") {
    const nlohmann::json& llama = bpe::reference().at("llama");
    Tokenizer t(bpe::pairs_of(bpe::learned_merges(llama.at("merges"))));
    for (const nlohmann::json& s : llama.at("specials"))
        t.register_special_tokens({{s[0].get<std::string>(), s[1].get<TokenId>()}});
    const std::string text = llama.at("text").get<std::string>();
    const TokenIds ids = llama.at("ids").get<TokenIds>();
    CHECK(t.encode(text, Special::all) == ids);
    CHECK(t.decode(ids) == text);
    CHECK(t.vocab_size() == 256 + 64 + 5);
    CHECK(t.n_vocab() == 100277);  // 1 + the largest ID, <|endofprompt|>'s 100276
}

TEST_CASE("text/tokenizer: Wikipedia's aaabdaaabac, merge by merge", "[text]") {
    // The header's example: aa → 256, ab → 257, (256, 257) → 258, applied in that order.
    const std::string text = "aaabdaaabac";
    CHECK(Tokenizer({{97, 97}}).encode(text) == TokenIds{256, 97, 98, 100, 256, 97, 98, 97, 99});
    CHECK(Tokenizer({{97, 97}, {97, 98}}).encode(text) == TokenIds{256, 257, 100, 256, 257, 97, 99});
    const Tokenizer t({{97, 97}, {97, 98}, {256, 257}});
    CHECK(t.encode_chunk(text) == TokenIds{258, 100, 258, 97, 99});
    CHECK(t.encode(text) == TokenIds{258, 100, 258, 97, 99});
    CHECK(t.decode({258, 100, 258, 97, 99}) == text);
    CHECK(t.bytes(256) == "aa");
    CHECK(t.bytes(257) == "ab");
    CHECK(t.bytes(258) == "aaab");
    CHECK(t.bytes(0) == std::string(1, '\0'));
    CHECK(t.bytes(255) == "\xFF");
    CHECK(t.vocab_size() == 259);
    CHECK(t.n_vocab() == 259);
    // The earliest merge first, wherever it is: after aa → 256, the pair (256, 97) → 257 is
    // learned before ab → 258, so "aaab" → 256 97 98 → 257 98, never 256 258.
    CHECK(Tokenizer({{97, 97}, {256, 97}, {97, 98}}).encode_chunk("aaab") == TokenIds{257, 98});
    // Pairs never cross chunks: "a a" is the chunks "a" and " a", so (a, space) never forms.
    CHECK(Tokenizer({{97, 32}, {32, 97}}).encode("a a") == TokenIds{97, 257});
}

TEST_CASE("text/tokenizer: the heap's IDs equal the lesson's rounds, chunk for chunk", "[text]") {
    // encode_chunk takes the lesson's rounds for short chunks and the heap for long ones; each
    // must give the other's IDs on every chunk, short or long.
    const Tokenizer wiki({{97, 97}, {256, 97}, {257, 98}});
    CHECK(wiki.encode_chunk_heap("aaabdaaabac") == TokenIds{258, 100, 258, 97, 99});
    CHECK(wiki.encode_chunk_heap("") == TokenIds{});
    CHECK(wiki.encode_chunk_heap("a") == TokenIds{97});
    // Overlapping occurrences: (a, a) in "aaa" merges once, left to right, then "aaaa" twice.
    const Tokenizer aa({{97, 97}});
    CHECK(aa.encode_chunk_heap("aaa") == TokenIds{256, 97});
    CHECK(aa.encode_chunk_heap("aaaa") == TokenIds{256, 256});
    const Tokenizer& t = bpe::excerpt_tokenizer();
    const std::string& kjv = bpe::excerpt();
    std::mt19937 rng(7);
    for (int trial = 0; trial < 600; ++trial) {
        const std::size_t n = rng() % 400;
        std::string chunk;
        for (std::size_t i = 0; i < n; ++i)  // random bytes, letters, or the excerpt (spaces and all)
            chunk.push_back(trial % 3 == 0   ? char(rng() % 256)
                            : trial % 3 == 1 ? char('a' + rng() % 26)
                                             : kjv[(std::size_t(trial) * 131 + i) % kjv.size()]);
        INFO("trial " << trial << ", " << n << " bytes");
        REQUIRE(t.encode_chunk_heap(chunk) == t.encode_chunk_lesson(chunk));
        REQUIRE(t.encode_chunk(chunk) == t.encode_chunk_lesson(chunk));
    }
    // The whole excerpt as one chunk, and a long run of one letter.
    CHECK(t.encode_chunk_heap(kjv) == t.encode_chunk_lesson(kjv));
    const std::string run(5000, 'e');
    CHECK(t.encode_chunk_heap(run) == t.encode_chunk_lesson(run));
}

TEST_CASE("text/tokenizer: minbpe's identity strings, untrained and trained", "[text]") {
    const Tokenizer untrained;
    CHECK(untrained.vocab_size() == 256);
    CHECK(untrained.n_merges() == 0);
    CHECK(untrained.pattern() == kGpt4Pattern);
    for (const std::string s : {"", "?", "hello world!!!? (안녕하세요!) lol123 😉"}) {
        INFO("text: " << s);
        CHECK(untrained.encode(s) == byte_ids(s));
        CHECK(untrained.decode(untrained.encode(s)) == s);
        const Tokenizer& trained = bpe::excerpt_tokenizer();
        CHECK(trained.decode(trained.encode(s)) == s);
    }
    CHECK(untrained.encode("?") == TokenIds{63});
    CHECK(untrained.encode("").empty());
    CHECK(untrained.decode({}).empty());
}

TEST_CASE("text/tokenizer: decode of a prefix may end inside a UTF-8 character", "[text]") {
    const Tokenizer t;
    CHECK(t.encode("é") == TokenIds{0xC3, 0xA9});
    CHECK(t.decode({0xC3}) == "\xC3");
}

// Random text of three kinds: bytes (mostly invalid UTF-8), pieces of the excerpt with random
// characters between them (merges fire, chunks are cut at odd places), whitespace and digits.
std::string random_text(std::mt19937& rng, int kind, std::size_t length) {
    static const std::vector<std::string> pieces = {" ", "\n", "  ", "\t", "é", "안", "😉", "'s", "'LL", "123",
                                                    "\xFF", "\xC3", "\x80", "\r\n", "\xE2\x80", "\xF0\x9F\x98"};
    const std::string& kjv = bpe::excerpt();
    std::uniform_int_distribution<int> byte(0, 255), coin(0, 3);
    std::uniform_int_distribution<std::size_t> at(0, kjv.size() - 1), piece(0, pieces.size() - 1), span(1, 40);
    std::string out;
    while (out.size() < length) {
        if (kind == 0) {
            out += char(byte(rng));
        } else if (kind == 1) {
            out += coin(rng) ? kjv.substr(at(rng), span(rng)) : pieces[piece(rng)];
        } else {
            out += " \t\n\r0123456789"[std::size_t(byte(rng)) % 14];
        }
    }
    out.resize(length);
    return out;
}

TEST_CASE("text/tokenizer: decode(encode(x)) == x for random byte strings, valid UTF-8 or not", "[text]") {
    const Tokenizer& t = bpe::excerpt_tokenizer();
    std::mt19937 rng(5489);
    std::uniform_int_distribution<std::size_t> length(0, 4000);
    std::size_t merged = 0;
    for (int trial = 0; trial < 600; ++trial) {
        const std::string x = random_text(rng, trial % 3, length(rng));
        const TokenIds ids = t.encode(x);
        INFO("trial " << trial << ", " << x.size() << " bytes");
        REQUIRE(t.decode(ids) == x);
        REQUIRE(ids.size() <= x.size());
        for (TokenId id : ids) {
            REQUIRE(id >= 0);
            REQUIRE(id < t.n_vocab());
            merged += id >= 256;
        }
    }
    CHECK(merged > 20000);  // the merges were used, not only byte tokens
}

TEST_CASE("text/tokenizer: decode(encode(x)) == x with special tokens among random bytes", "[text]") {
    Tokenizer t = bpe::excerpt_tokenizer();
    t.register_special_tokens({{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}});
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::size_t> length(0, 400);
    for (int trial = 0; trial < 100; ++trial) {
        std::string x;
        for (int part = 0; part < 4; ++part)
            x += random_text(rng, trial % 3, length(rng)) + (part % 2 ? "<|endoftext|>" : "<|fim_prefix|>");
        const TokenIds ids = t.encode(x, Special::all);
        REQUIRE(std::count(ids.begin(), ids.end(), 100257) == 2);
        REQUIRE(std::count(ids.begin(), ids.end(), 100258) == 2);
        REQUIRE(t.decode(ids) == x);
        REQUIRE(t.decode(t.encode(x, Special::none)) == x);
    }
}

TEST_CASE("text/tokenizer: the whole KJV decodes to itself", "[text]") {
    if (std::system("command -v bible > /dev/null 2>&1") != 0) {
        WARN("the bible program is not installed (.ci/install-deps): the KJV round trip is skipped");
        return;
    }
    const std::string kjv = xgrad::data::read_bible();
    REQUIRE(kjv.size() > 4000000);
    const Tokenizer& t = bpe::excerpt_tokenizer();
    const TokenIds ids = t.encode(kjv);
    CHECK(t.decode(ids) == kjv);
    // The excerpt is the KJV's first 11,987 bytes, whole verses; its last chunk, ".\n", ends
    // where the next verse's "Ge" begins, so its IDs open the KJV's.
    const TokenIds head = bpe::reference().at("excerpt_ids").get<TokenIds>();
    REQUIRE(ids.size() > head.size());
    CHECK(TokenIds(ids.begin(), ids.begin() + std::ptrdiff_t(head.size())) == head);
}

TEST_CASE("text/tokenizer: special tokens under none_raise, none and all", "[text]") {
    Tokenizer t;
    const std::string plain = "a<|eot|>b";
    CHECK(t.encode(plain) == byte_ids(plain));  // nothing registered: ordinary text
    t.register_special_tokens({{"<|eot|>", 256}, {"<|pad|>", 300}});
    CHECK(t.vocab_size() == 258);
    CHECK(t.n_vocab() == 301);
    CHECK(t.bytes(256) == "<|eot|>");
    CHECK(t.bytes(300) == "<|pad|>");
    CHECK_THROWS_AS(t.bytes(257), IndexError);

    const std::string raised = message_of<ValueError>([&] { t.encode(plain); });
    CHECK_THAT(raised, Contains("<|eot|>") && Contains("at byte 1") && Contains("Special::all"));
    CHECK_THAT(message_of<ValueError>([&] { t.encode("xx<|pad|>", Special::none_raise); }),
               Contains("<|pad|>") && Contains("at byte 2"));
    CHECK(t.encode("a<|eot", Special::none_raise) == byte_ids("a<|eot"));  // no whole special token

    CHECK(t.encode(plain, Special::none) == byte_ids(plain));
    CHECK(t.encode_ordinary(plain) == byte_ids(plain));
    CHECK(t.encode(plain, Special::all) == TokenIds{97, 256, 98});
    CHECK(t.encode("<|eot|>", Special::all) == TokenIds{256});
    CHECK(t.encode("<|eot|><|pad|><|eot|>", Special::all) == TokenIds{256, 300, 256});
    CHECK(t.encode("<|pad|>x<|eot|>", Special::all) == TokenIds{300, 120, 256});
    CHECK(t.encode("", Special::all).empty());
    CHECK(t.decode({97, 256, 98, 300}) == "a<|eot|>b<|pad|>");
}

TEST_CASE("text/tokenizer: where two special tokens match at one byte, the first registered wins", "[text]") {
    // As Python's re.split with the alternation of the tokens in their order (minbpe's encode).
    Tokenizer short_first;
    short_first.register_special_tokens({{"<|a|>", 256}, {"<|a|>b", 257}});
    CHECK(short_first.encode("<|a|>b", Special::all) == TokenIds{256, 98});
    Tokenizer long_first;
    long_first.register_special_tokens({{"<|a|>b", 257}, {"<|a|>", 256}});
    CHECK(long_first.encode("<|a|>b", Special::all) == TokenIds{257});
    CHECK(long_first.encode("x<|a|>", Special::all) == TokenIds{120, 256});
}

TEST_CASE("text/tokenizer: register_special_tokens refuses bad tokens with ValueError", "[text]") {
    Tokenizer t({{97, 97}});  // one merge: token 256 is "aa", the first free ID is 257
    t.register_special_tokens({{"<|eot|>", 257}});
    const auto refused = [&](const std::vector<SpecialToken>& specials) {
        return message_of<ValueError>([&] { t.register_special_tokens(specials); });
    };
    CHECK_THAT(refused({{"", 300}}), Contains("1 to 256 bytes") && Contains("ID 300"));
    CHECK_THAT(refused({{" x", 300}}), Contains("no whitespace"));
    CHECK_THAT(refused({{"a\tb", 300}}), Contains("no whitespace"));
    CHECK_THAT(refused({{"a\nb", 300}}), Contains("no whitespace"));
    CHECK_THAT(refused({{"del\x7F", 300}}), Contains("control bytes"));
    CHECK_THAT(refused({{std::string(257, 'x'), 300}}), Contains("1 to 256 bytes"));
    CHECK_NOTHROW(Tokenizer().register_special_tokens({{std::string(256, 'x'), 300}}));
    // IDs: not a byte, not a merged token, below 2^31.
    CHECK_THAT(refused({{"<|x|>", 256}}), Contains("ID 256") && Contains("[257, 2^31)"));
    CHECK_THAT(refused({{"<|x|>", 97}}), Contains("ID 97"));
    CHECK_THAT(refused({{"<|x|>", -1}}), Contains("ID -1"));
    CHECK_THAT(refused({{"<|x|>", TokenId(1) << 31}}), Contains("2147483648"));
    CHECK_NOTHROW(Tokenizer().register_special_tokens({{"<|x|>", (TokenId(1) << 31) - 1}}));
    // Repeats: of a registered token, or inside one call.
    CHECK_THAT(refused({{"<|x|>", 257}}), Contains("repeats the ID") && Contains("<|eot|>"));
    CHECK_THAT(refused({{"<|eot|>", 400}}), Contains("repeats the text"));
    CHECK_THAT(refused({{"<|x|>", 400}, {"<|y|>", 400}}), Contains("repeats the ID"));
    CHECK_THAT(refused({{"<|x|>", 400}, {"<|x|>", 401}}), Contains("repeats the text"));
    // After a refusal nothing of the call was added, not even the tokens before the bad one.
    REQUIRE(t.special_tokens().size() == 1);
    CHECK(t.special_tokens()[0].text == "<|eot|>");
    CHECK(t.vocab_size() == 258);
    CHECK_THROWS_AS(t.decode({400}), IndexError);
}

TEST_CASE("text/tokenizer: merges that use a later token or repeat a pair are refused", "[text]") {
    CHECK_THAT(message_of<ValueError>([] { Tokenizer({{97, 97}, {258, 97}}); }),
               Contains("merge 1 (258, 97)") && Contains("[0, 257)"));
    CHECK_THAT(message_of<ValueError>([] { Tokenizer({{256, 97}}); }), Contains("merge 0"));
    CHECK_THAT(message_of<ValueError>([] { Tokenizer({{97, -1}}); }), Contains("merge 0 (97, -1)"));
    CHECK_THAT(message_of<ValueError>([] { Tokenizer({{97, 97}, {98, 98}, {97, 97}}); }),
               Contains("merge 2 repeats the pair (97, 97) of merge 0"));
    CHECK_THROWS_AS(Tokenizer({}, "(?"), ValueError);
    CHECK_NOTHROW(Tokenizer({{97, 97}, {256, 256}, {257, 257}}));  // each uses only earlier tokens
}

TEST_CASE("text/tokenizer: merges whose tokens would hold more than 256 MiB are refused before they are built", "[text]") {
    // (a, a) → 256 of 2 bytes, then (255 + i, 255 + i) → 256 + i of 2^(i+1) bytes: the vocabulary
    // holds 256 + 2 + 4 + … + 2^(i+1) = 254 + 2^(i+2) bytes after merge i, past 2^28 at merge 26
    // (a token of 2^27 bytes). A 40-line file would otherwise ask for 2^41 bytes.
    std::vector<Pair> doubling{{97, 97}};
    for (TokenId i = 1; i < 40; ++i) doubling.push_back({255 + i, 255 + i});
    CHECK_THAT(message_of<ValueError>([&] { Tokenizer{doubling}; }),
               Contains("merge 26 (281, 281)") && Contains("134217728 bytes") && Contains("256 MiB"));
}

TEST_CASE("text/tokenizer: decode and bytes of an unknown ID throw IndexError naming it", "[text]") {
    const Tokenizer& t = bpe::excerpt_tokenizer();
    CHECK_THAT(message_of<IndexError>([&] { t.decode({97, 512}); }),
               Contains("ids[1] = 512") && Contains("[0, 512)"));
    CHECK_THAT(message_of<IndexError>([&] { t.decode({-1}); }), Contains("ids[0] = -1"));
    CHECK_THAT(message_of<IndexError>([&] { t.bytes(600); }), Contains("600"));
    Tokenizer with_special = t;
    with_special.register_special_tokens({{"<|endoftext|>", 100257}});
    CHECK(with_special.decode({100257}) == "<|endoftext|>");
    CHECK_THAT(message_of<IndexError>([&] { with_special.decode({100256}); }),
               Contains("ids[0] = 100256") && Contains("special tokens"));
}

TEST_CASE("text/tokenizer: a moved-from Tokenizer throws ValueError saying so, and encodes once assigned again",
          "[text][regression]") {
    Tokenizer t({{97, 97}});
    const Tokenizer taker = std::move(t);
    testing::TempDir dir;
    // NOLINTBEGIN(bugprone-use-after-move): the use after the move is what is tested
    const std::vector<std::pair<const char*, std::function<void()>>> uses{
        {"encode", [&] { t.encode("aab"); }},
        {"encode_ordinary", [&] { t.encode_ordinary("aab"); }},
        {"encode_chunk", [&] { t.encode_chunk("aab"); }},
        {"decode", [&] { t.decode({97, 98}); }},
        {"bytes", [&] { t.bytes(97); }},
        {"pattern", [&] { (void)t.pattern(); }},
        {"splitter", [&] { (void)t.splitter().split("aab"); }},
        {"vocab_size", [&] { (void)t.vocab_size(); }},
        {"n_merges", [&] { (void)t.n_merges(); }},
        {"save", [&] { t.save(dir.file("tok.bpe")); }},
        {"register_special_tokens", [&] { t.register_special_tokens({{"<|eot|>", 300}}); }},
    };
    for (const auto& [name, use] : uses) {
        INFO(name);
        CHECK_THAT(message_of<ValueError>(use), Contains(std::string("Tokenizer::") + name) && Contains("moved from"));
    }
    CHECK_FALSE(std::filesystem::exists(dir.file("tok.bpe")));
    CHECK_THROWS_AS(Tokenizer(t).encode("a"), ValueError);  // a copy of a moved-from Tokenizer is one too
    t = Tokenizer({{98, 98}});
    CHECK(t.encode("abb") == TokenIds{97, 256});
    // NOLINTEND(bugprone-use-after-move)
    CHECK(taker.encode("aab") == TokenIds{256, 98});
}

}  // namespace xgrad::text::tokenizer_tests
