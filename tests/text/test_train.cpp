// tests/text/test_train.cpp — text/train: learning the merges, the lesson's way (train_lesson)
// and the fast way (train), which must learn the same ones.
//
//   * minbpe's merges (tests/reference/bpe_reference.json, written by
//     tests/reference/make_bpe_reference.py), pairs and counts, from both trainers: the KJV
//     excerpt with GPT-4's split (256 merges) and GPT-2's (64), a text with special tokens (64),
//     Wikipedia's "aaabdaaabac" (3);
//   * ties by hand: texts whose pairs share the top count, where only the rule "the pair seen
//     first in the text wins" gives the merges (neither the larger nor the smaller pair does);
//   * lesson == fast on random texts (seeded): few letters (many ties), runs of one letter
//     (overlapping pairs), random bytes (invalid UTF-8), each trained until no pair is left;
//   * the callback, vocab_size 256 (no merges), make_tokenizer and train_tokenizer;
//   * bad input: vocab_size below 256 or from 2^31, a text that allows fewer merges.
//
// Legend: M merges (vocab_size − 256); merge i makes token 256 + i.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/text/train.hpp>
#include "test_helpers.hpp"
#include "text/bpe_reference.hpp"

using Catch::Matchers::Contains;

namespace xgrad::text::train_tests {

using testing::message_of;
using testing::bpe::learned_merges;
using testing::bpe::require_same_merges;
namespace bpe = testing::bpe;

using Trainer = std::vector<LearnedMerge> (*)(std::string_view, std::int64_t, const Splitter&, const MergeCallback&);
const std::vector<std::pair<std::string, Trainer>> kTrainers = {{"train", &train}, {"train_lesson", &train_lesson}};

TEST_CASE("text/train: minbpe's merges of the KJV excerpt, GPT-4's split, both trainers", "[text]") {
    const std::vector<LearnedMerge> want = learned_merges(bpe::reference().at("merges"));
    REQUIRE(want.size() == 256);
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        require_same_merges(trainer(bpe::excerpt(), 512, Splitter(), nullptr), want);
    }
    CHECK(make_tokenizer(train(bpe::excerpt(), 512)) == bpe::excerpt_tokenizer());
}

TEST_CASE("text/train: minbpe's merges of the KJV excerpt, GPT-2's split, both trainers", "[text]") {
    const std::vector<LearnedMerge> want = learned_merges(bpe::reference().at("merges_gpt2"));
    REQUIRE(want.size() == 64);
    const Splitter gpt2(std::string{kGpt2Pattern});
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        require_same_merges(trainer(bpe::excerpt(), 320, gpt2, nullptr), want);
    }
    const Tokenizer t = train_tokenizer(bpe::excerpt(), 320, gpt2);
    CHECK(t.pattern() == kGpt2Pattern);
    CHECK(t.n_merges() == 64);
}

TEST_CASE("text/train: minbpe's merges of a text with special tokens, both trainers", "[text]") {
    // The trainer sees the special tokens' text as ordinary text, as minbpe's does.
    const nlohmann::json& llama = bpe::reference().at("llama");
    const std::string text = llama.at("text").get<std::string>();
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        require_same_merges(trainer(text, 256 + 64, Splitter(), nullptr), learned_merges(llama.at("merges")));
    }
}

TEST_CASE("text/train: Wikipedia's aaabdaaabac, 3 merges, both trainers", "[text]") {
    // By hand. Pairs of a a a b d a a a b a c: aa 4, ab 2, bd 1, da 1, ba 1, ac 1 → aa = 256.
    // Then 256 a b d 256 a b a c: (256, a) 2 and ab 2 tie; (256, a) is seen first → 257.
    // Then 257 b d 257 b a c: (257, b) 2 → 258. (Wikipedia's article merges ab second; minbpe's
    // tie rule takes (256, a), and the IDs come out the same.)
    const std::vector<LearnedMerge> by_hand = {{{97, 97}, 4}, {{256, 97}, 2}, {{257, 98}, 2}};
    require_same_merges(learned_merges(bpe::reference().at("wikipedia").at("merges")), by_hand);
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        const std::vector<LearnedMerge> merges = trainer("aaabdaaabac", 256 + 3, Splitter(), nullptr);
        require_same_merges(merges, by_hand);
        const Tokenizer t = make_tokenizer(merges);
        CHECK(t.encode("aaabdaaabac") == TokenIds{258, 100, 258, 97, 99});
        CHECK(t.decode(t.encode("aaabdaaabac")) == "aaabdaaabac");
    }
}

TEST_CASE("text/train: ties go to the pair seen first in the text", "[text]") {
    // "ab zy ab zy": chunks "ab" " zy" " ab" " zy". Pairs: ab 2, " z" 2, zy 2, " a" 1.
    //   merge 0: ab (first seen), not zy (the largest pair) nor " z" (the smallest) → 256
    //   merge 1: chunks 256, " zy", " 256", " zy": " z" 2 and zy 2, " z" first in " zy" → 257
    //   merge 2: (257, y) 2 → 258;   merge 3: (" ", 256) 1 → 259; then every chunk is one token.
    const std::vector<LearnedMerge> abzy = {{{97, 98}, 2}, {{32, 122}, 2}, {{257, 121}, 2}, {{32, 256}, 1}};
    // "cd ab ab cd": cd 2, " a" 2, ab 2, " c" 1: cd is seen first, and is the largest pair.
    const std::vector<LearnedMerge> cdab = {{{99, 100}, 2}, {{32, 97}, 2}, {{257, 98}, 2}, {{32, 256}, 1}};
    // "xy ab ab xy xy ab": xy 3, " a" 3, ab 3, " x" 2: xy seen first wins, though " a" and ab
    // occur first in the chunk " ab", the one that occurs most often.
    const std::vector<LearnedMerge> xyab = {{{120, 121}, 3}, {{32, 97}, 3}, {{257, 98}, 3}, {{32, 256}, 2}};
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        require_same_merges(trainer("ab zy ab zy", 260, Splitter(), nullptr), abzy);
        require_same_merges(trainer("cd ab ab cd", 260, Splitter(), nullptr), cdab);
        require_same_merges(trainer("xy ab ab xy xy ab", 260, Splitter(), nullptr), xyab);
    }
}

// The merges a trainer learns on `text` until it runs out of pairs (collected by the callback),
// and the message of the ValueError it then throws.
std::pair<std::vector<LearnedMerge>, std::string> until_exhausted(Trainer trainer, const std::string& text,
                                                                  const Splitter& split) {
    std::vector<LearnedMerge> merges;
    std::string message;
    try {
        trainer(text, 256 + std::int64_t(text.size()), split,
                [&](std::int64_t i, const LearnedMerge& m) {
                    REQUIRE(i == std::int64_t(merges.size()));
                    merges.push_back(m);
                });
        FAIL("a text of n bytes allows at most n - 1 merges");
    } catch (const ValueError& e) {
        message = e.what();
    }
    return {merges, message};
}

// Random text of `n` bytes: kind 0 letters a, b and spaces; 1 runs of one letter (overlapping
// pairs: "aaaa" holds aa three times, merged twice); 2 random bytes; 3 letters, digits, line
// breaks and apostrophes (every alternative of GPT-4's pattern).
std::string random_training_text(std::mt19937& rng, int kind, std::size_t n) {
    std::uniform_int_distribution<int> byte(0, 255), run(1, 9);
    std::string out;
    while (out.size() < n) {
        const int r = byte(rng);
        if (kind == 0) out += "aab "[r % 4];
        else if (kind == 1) out += std::string(std::size_t(run(rng)), "aab \n"[r % 5]);
        else if (kind == 2) out += char(r);
        else out += "abc12 \n's\r"[r % 10];
    }
    out.resize(n);
    return out;
}

TEST_CASE("text/train: the lesson's merges and the fast ones agree on random texts", "[text]") {
    const Splitter gpt4, gpt2(std::string{kGpt2Pattern});
    std::mt19937 rng(1234);
    std::size_t compared = 0;
    for (int kind = 0; kind < 4; ++kind)
        for (int trial = 0; trial < 3; ++trial) {
            const std::string text = random_training_text(rng, kind, 1500);
            for (const Splitter* split : {&gpt4, &gpt2}) {
                INFO("kind " << kind << ", trial " << trial << ", pattern " << split->pattern());
                const auto [fast, fast_error] = until_exhausted(&train, text, *split);
                const auto [lesson, lesson_error] = until_exhausted(&train_lesson, text, *split);
                require_same_merges(fast, lesson);
                CHECK(fast_error == lesson_error);
                CHECK_THAT(fast_error, Contains("allows only " + std::to_string(fast.size()) + " merges"));
                compared += fast.size();
                // Exhausted: every chunk is one token.
                const Tokenizer t = make_tokenizer(fast, *split);
                CHECK(t.encode(text).size() == split->split(text).size());
            }
        }
    CHECK(compared > 2000);
}

TEST_CASE("text/train: the lesson's merges and the fast ones agree where thousands of pairs tie", "[text]") {
    // One chunk of 1,000 CJK characters, each once (U+4E00…, 3 bytes each, all letters): most
    // pairs occur once or twice, so every round ties many pairs inside one long word. Then 600
    // continuation bytes (0x80…0xBF, never a character: one chunk no match covers) and a run of
    // one letter, whose merges double their token.
    std::string cjk;
    for (unsigned cp = 0x4E00; cp < 0x4E00 + 1000; ++cp)
        cjk += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    std::mt19937 rng(99);
    std::string continuation;
    for (int i = 0; i < 600; ++i) continuation.push_back(char(0x80 + rng() % 64));
    for (const std::string& text : {cjk, continuation, std::string(1000, 'a'), cjk + " " + continuation}) {
        const auto [fast, fast_error] = until_exhausted(&train, text, Splitter());
        const auto [lesson, lesson_error] = until_exhausted(&train_lesson, text, Splitter());
        require_same_merges(fast, lesson);
        CHECK(fast_error == lesson_error);
        CHECK(fast.size() > 9);
    }
}

TEST_CASE("text/train: the callback sees every merge, in order", "[text]") {
    std::vector<std::int64_t> indices;
    std::vector<LearnedMerge> seen;
    const MergeCallback record = [&](std::int64_t i, const LearnedMerge& m) {
        indices.push_back(i);
        seen.push_back(m);
    };
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        indices.clear();
        seen.clear();
        const std::vector<LearnedMerge> merges = trainer(bpe::excerpt(), 256 + 20, Splitter(), record);
        CHECK(indices == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
        require_same_merges(seen, merges);
    }
}

TEST_CASE("text/train: vocab_size 256 learns nothing, make_tokenizer and train_tokenizer", "[text]") {
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        CHECK(trainer("some text", 256, Splitter(), nullptr).empty());
        CHECK(trainer("", 256, Splitter(), nullptr).empty());
    }
    CHECK(train_tokenizer("some text", 256) == Tokenizer());
    const Tokenizer t = train_tokenizer("ab zy ab zy", 260);
    CHECK(t == make_tokenizer(train("ab zy ab zy", 260)));
    CHECK(t.merges() == std::vector<Pair>{{97, 98}, {32, 122}, {257, 121}, {32, 256}});
    CHECK(t.encode("ab zy ab zy") == TokenIds{256, 258, 259, 258});
}

TEST_CASE("text/train: bad vocab sizes throw ValueError", "[text]") {
    for (const auto& [name, trainer] : kTrainers) {
        INFO(name);
        const auto refused = [&, trainer = trainer](std::string_view text, std::int64_t vocab_size) {
            return message_of<ValueError>([&] { trainer(text, vocab_size, Splitter(), nullptr); });
        };
        CHECK_THAT(refused("ab zy ab zy", 255), Contains("vocab_size 255") && Contains("[256, 2^31 − 1]"));
        CHECK_THAT(refused("ab zy ab zy", -1), Contains("vocab_size -1"));
        CHECK_THAT(refused("ab zy ab zy", std::int64_t(1) << 31), Contains("vocab_size 2147483648"));
        // "ab zy ab zy" allows 4 merges (the hand-made test above): 260 is its largest vocab_size.
        CHECK(trainer("ab zy ab zy", 260, Splitter(), nullptr).size() == 4);
        CHECK_THAT(refused("ab zy ab zy", 261), Contains("allows only 4 merges") && Contains("vocab_size 261 needs 5") &&
                                                    Contains("at most 260"));
        CHECK_THAT(refused("", 257), Contains("allows only 0 merges"));
        CHECK_THAT(refused("a b c", 259), Contains("allows only 2 merges"));  // " b" and " c": one pair each
    }
}

}  // namespace xgrad::text::train_tests
