// tests/text/test_tokenizer_file.cpp — text/tokenizer: the tokenizer's file, Tokenizer::save and
// Tokenizer::load.
//
//   * the format, byte for byte, for Wikipedia's three merges and a special token, with the
//     CRC-32 computed here (the bitwise algorithm, checked on its standard check value);
//   * minbpe's save/load test: 64 merges learned on a text with special tokens, without and with
//     the tokens registered (IDs from tests/reference/make_bpe_reference.py), the same IDs and
//     text after loading;
//   * save is atomic: an existing file replaced, no temporary file left, also when it fails;
//   * load refuses, naming the path: with std::runtime_error a missing file, a FIFO, a directory;
//     with ValueError, naming the line too, a wrong header, a changed byte, a truncated file, a
//     merge using a later token, a repeated merge, a refused special token, a malformed line, a
//     line after the special tokens, trailing bytes after the checksum. A failed load changes
//     nothing;
//   * a script's catch (xgrad::ValueError&) and catch (xgrad::IndexError&) catch the tokenizer's
//     errors, core's classes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/io/checksum.hpp>
#include <xgrad/text/train.hpp>
#include "test_helpers.hpp"
#include "text/bpe_reference.hpp"

using Catch::Matchers::Contains;

namespace xgrad::text::tokenizer_file_tests {

using testing::message_of;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;
namespace bpe = testing::bpe;

// CRC-32 as zlib computes it (the reflected polynomial 0xEDB88320, initial and final XOR with
// 0xFFFFFFFF), one bit at a time.
std::uint32_t crc32_of(const std::string& bytes) {
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char b : bytes) {
        crc ^= b;
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return crc ^ 0xFFFFFFFFu;
}

// `body` with the checksum line that load() expects after it.
std::string with_crc(const std::string& body) {
    char line[32];
    std::snprintf(line, sizeof line, "crc32 %08x\n", unsigned(crc32_of(body)));
    return body + line;
}

// The file of Wikipedia's tokenizer (aa, ab, aa+ab) with the special token "<|eot|>" = 300,
// without its checksum line; `merge_lines` replaces the three merge lines.
std::string wikipedia_body(const std::string& merge_lines = "97 97\n97 98\n256 257\n") {
    return "xgrad-bpe 1\npattern " + std::string(kGpt4Pattern) + "\nmerges 3\n" + merge_lines +
           "specials 1\n300 <|eot|>\n";
}

Tokenizer wikipedia_tokenizer() {
    Tokenizer t({{97, 97}, {97, 98}, {256, 257}});
    t.register_special_tokens({{"<|eot|>", 300}});
    return t;
}

TEST_CASE("text/tokenizer file: CRC-32 of the standard check string", "[text]") {
    CHECK(crc32_of("123456789") == 0xCBF43926u);  // the check value of CRC-32/ISO-HDLC (zlib's)
    CHECK(crc32_of("") == 0u);
}

TEST_CASE("text/tokenizer file: the format, byte for byte", "[text]") {
    TempDir dir;
    wikipedia_tokenizer().save(dir.file("wiki.bpe"));
    CHECK(read_bytes(dir.file("wiki.bpe")) == with_crc(wikipedia_body()));
    const Tokenizer loaded = Tokenizer::load(dir.file("wiki.bpe"));
    CHECK(loaded == wikipedia_tokenizer());
    CHECK(loaded.encode("aaabdaaabac<|eot|>", Special::all) == TokenIds{258, 100, 258, 97, 99, 300});
    // A file written by hand with the right checksum loads as well.
    write_bytes(dir.file("hand.bpe"), with_crc(wikipedia_body()));
    CHECK(Tokenizer::load(dir.file("hand.bpe")) == wikipedia_tokenizer());
}

TEST_CASE("text/tokenizer file: minbpe's save/load, without and with special tokens", "[text]") {
    const nlohmann::json& llama = bpe::reference().at("llama");
    const std::string text = llama.at("text").get<std::string>();
    for (bool specials : {false, true}) {
        INFO((specials ? "with" : "without") << " special tokens");
        Tokenizer t = train_tokenizer(text, 256 + 64);
        if (specials)
            for (const nlohmann::json& s : llama.at("specials"))
                t.register_special_tokens({{s[0].get<std::string>(), s[1].get<TokenId>()}});
        const TokenIds ids = t.encode(text, Special::all);
        CHECK(t.decode(ids) == text);
        if (specials) CHECK(ids == llama.at("ids").get<TokenIds>());
        TempDir dir;
        t.save(dir.file("llama.bpe"));
        const Tokenizer loaded = Tokenizer::load(dir.file("llama.bpe"));
        CHECK(loaded == t);
        CHECK(loaded.special_tokens().size() == (specials ? 5u : 0u));
        CHECK(loaded.decode(ids) == text);
        CHECK(loaded.encode(text, Special::all) == ids);
    }
}

TEST_CASE("text/tokenizer: identity() names V, the merges and the FNV-1a hash of the file's text", "[text]") {
    const Tokenizer t = wikipedia_tokenizer();
    CHECK(t.identity() == fmt::format("bpe V {}: {} merges, FNV-1a {:016x}", t.n_vocab(), t.n_merges(),
                                      xgrad::io::fnv1a64(t.to_text())));
    TempDir dir;
    t.save(dir.file("wiki.bpe"));
    CHECK(Tokenizer::load(dir.file("wiki.bpe")).identity() == t.identity());  // a round trip keeps it
    const Tokenizer other({{32, 116}}, std::string(kGpt2Pattern));
    CHECK(other.identity().rfind("bpe V 257: 1 merges, FNV-1a ", 0) == 0);
    CHECK(other.identity() != Tokenizer({{32, 116}}).identity());  // the split pattern is part of it
}

TEST_CASE("text/tokenizer file: a GPT-2 tokenizer keeps its pattern", "[text]") {
    TempDir dir;
    const Tokenizer t({{32, 116}}, std::string(kGpt2Pattern));
    t.save(dir.file("gpt2.bpe"));
    const Tokenizer loaded = Tokenizer::load(dir.file("gpt2.bpe"));
    CHECK(loaded.pattern() == kGpt2Pattern);
    CHECK(loaded.encode(" t 12345") == TokenIds{256, 32, 49, 50, 51, 52, 53});  // GPT-2: " 12345" one chunk
}

TEST_CASE("text/tokenizer file: save replaces an existing file and leaves no temporary file", "[text]") {
    TempDir dir;
    const std::string path = dir.file("tok.bpe");
    write_bytes(path, "an older file\n");
    wikipedia_tokenizer().save(path);
    CHECK(dir.listing() == std::vector<std::string>{"tok.bpe"});
    CHECK(Tokenizer::load(path) == wikipedia_tokenizer());
    const Tokenizer other({{32, 116}});
    other.save(path);
    CHECK(dir.listing() == std::vector<std::string>{"tok.bpe"});
    CHECK(Tokenizer::load(path) == other);
}

TEST_CASE("text/tokenizer file: a save that fails throws naming the path and leaves nothing behind", "[text]") {
    TempDir dir;
    const std::string missing_dir = dir.file("no/such/dir/tok.bpe");
    CHECK_THAT(message_of<std::runtime_error>([&] { wikipedia_tokenizer().save(missing_dir); }),
               Contains(missing_dir));
    // Over a directory: the temporary file is written, the rename fails, the temporary is removed.
    std::filesystem::create_directory(dir.file("a_directory"));
    CHECK_THAT(message_of<std::runtime_error>([&] { wikipedia_tokenizer().save(dir.file("a_directory")); }),
               Contains(dir.file("a_directory")));
    CHECK(dir.listing() == std::vector<std::string>{"a_directory"});
}

TEST_CASE("text/tokenizer file: save through a symbolic link writes its target and keeps the link", "[text]") {
    // As open(2), Python's open(path, "w") and the checkpoints' save_safetensors: the link stays.
    TempDir dir;
    write_bytes(dir.file("real.bpe"), "an older file\n");
    std::filesystem::create_symlink("real.bpe", dir.file("link.bpe"));
    wikipedia_tokenizer().save(dir.file("link.bpe"));
    CHECK(std::filesystem::is_symlink(dir.file("link.bpe")));
    CHECK(Tokenizer::load(dir.file("real.bpe")) == wikipedia_tokenizer());
    CHECK(dir.listing() == std::vector<std::string>{"link.bpe", "real.bpe"});
}

TEST_CASE("text/tokenizer file: load refuses a FIFO and a directory before reading, naming the kind", "[text]") {
    // A FIFO without a writer would block open(2) forever; a directory cannot be read.
    TempDir dir;
    const std::string fifo = dir.file("fifo.bpe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(message_of<std::runtime_error>([&] { Tokenizer::load(fifo); }),
               Contains(fifo) && Contains("not a regular file"));
    CHECK_THAT(message_of<std::runtime_error>([&] { Tokenizer::load(dir.path.string()); }),
               Contains("not a regular file"));
}

// Writes `bytes` to a file, requires that load() refuses it with ValueError, and returns the
// message, which must name the file.
std::string refused(const TempDir& dir, const std::string& bytes) {
    const std::string path = dir.file("bad.bpe");
    write_bytes(path, bytes);
    const std::string message = message_of<ValueError>([&] { Tokenizer::load(path); });
    CHECK_THAT(message, Contains(path));
    return message;
}

TEST_CASE("text/tokenizer file: load refuses a missing file, a wrong header, a damaged or truncated file", "[text]") {
    TempDir dir;
    CHECK_THAT(message_of<std::runtime_error>([&] { Tokenizer::load(dir.file("missing.bpe")); }),
               Contains(dir.file("missing.bpe")) && Contains("No such file"));
    CHECK_THAT(message_of<std::runtime_error>([&] { Tokenizer::load(dir.path.string()); }),
               Contains(dir.path.string()));
    CHECK_THAT(refused(dir, ""), Contains("line 1") && Contains("checksum"));
    CHECK_THAT(refused(dir, with_crc("minbpe v1\n")), Contains("line 1") && Contains("expected \"xgrad-bpe 1\""));

    const std::string good = with_crc(wikipedia_body());
    // Any one byte changed: the checksum no longer matches (its line is line 9).
    for (std::size_t at : {std::size_t(0), std::size_t(20), good.find("256 257"), good.find("<|eot|>")}) {
        std::string damaged = good;
        damaged[at] = char(damaged[at] ^ 0x01);
        CHECK_THAT(refused(dir, damaged), Contains("line 9") && Contains("checksum"));
    }
    // Cut anywhere: the last line is no longer the checksum of what precedes it.
    for (std::size_t keep : {std::size_t(1), std::size_t(12), good.size() / 2, good.size() - 10, good.size() - 1})
        CHECK_THAT(refused(dir, good.substr(0, keep)), Contains("checksum"));
    // A truncated body with a checksum that matches it: the file ends before its merges.
    CHECK_THAT(refused(dir, with_crc("xgrad-bpe 1\npattern a\nmerges 3\n97 97\n")),
               Contains("line 5") && Contains("ends before"));
    // Bytes after the checksum line.
    CHECK_THAT(refused(dir, good + "garbage\n"), Contains("line 10") && Contains("checksum"));
    CHECK_THAT(refused(dir, good + "\n"), Contains("checksum"));
}

TEST_CASE("text/tokenizer file: load refuses bad merges and special tokens, naming the line", "[text]") {
    TempDir dir;
    // Lines: 1 header, 2 pattern, 3 "merges 3", 4-6 the merges, 7 "specials 1", 8 the special token.
    CHECK_THAT(refused(dir, with_crc(wikipedia_body("97 97\n258 97\n256 257\n"))),
               Contains("line 5") && Contains("(258, 97)"));
    CHECK_THAT(refused(dir, with_crc(wikipedia_body("97 97\n97 98\n97 97\n"))),
               Contains("line 6") && Contains("repeats the pair (97, 97)"));
    CHECK_THAT(refused(dir, with_crc(wikipedia_body("97 97\n97 x\n256 257\n"))),
               Contains("line 5") && Contains("<left> <right>"));
    CHECK_THAT(refused(dir, with_crc(wikipedia_body("97 97\n97 98 99\n256 257\n"))), Contains("line 5"));
    std::string body = wikipedia_body();
    CHECK_THAT(refused(dir, with_crc(body.replace(body.find("300 <|eot|>"), 3, "257"))),
               Contains("line 8") && Contains("ID 257"));
    body = wikipedia_body();
    CHECK_THAT(refused(dir, with_crc(body.replace(body.find("specials 1"), 10, "specials 2") + "301 <|eot|>\n")),
               Contains("line 9") && Contains("repeats the text"));
    CHECK_THAT(refused(dir, with_crc(wikipedia_body() + "one line too many\n")),
               Contains("line 9") && Contains("unexpected line"));
    body = wikipedia_body();
    CHECK_THAT(refused(dir, with_crc(body.replace(body.find("merges 3"), 8, "merges -3"))),
               Contains("line 3") && Contains("merges count"));
    body = wikipedia_body();
    CHECK_THAT(refused(dir, with_crc(body.replace(body.find("merges 3"), 8, "merge 3"))),
               Contains("line 3") && Contains("expected \"merges "));
    CHECK_THAT(refused(dir, with_crc("xgrad-bpe 1\npattern (?\nmerges 0\nspecials 0\n")),
               Contains("line 2") && Contains("does not compile"));
    // A 40-line file of merges that each double the last token (test_tokenizer.cpp): refused at
    // merge 26, line 4 + 26, before its 2^27 bytes are built.
    std::string doubling = "xgrad-bpe 1\npattern a\nmerges 40\n97 97\n";
    for (int i = 1; i < 40; ++i) doubling += std::to_string(255 + i) + " " + std::to_string(255 + i) + "\n";
    CHECK_THAT(refused(dir, with_crc(doubling + "specials 0\n")), Contains("line 30") && Contains("256 MiB"));
}

TEST_CASE("text/tokenizer file: a failed load leaves the tokenizer it would replace unchanged", "[text]") {
    TempDir dir;
    wikipedia_tokenizer().save(dir.file("good.bpe"));
    write_bytes(dir.file("bad.bpe"), with_crc(wikipedia_body("97 97\n97 98\n97 97\n")));
    Tokenizer t = Tokenizer::load(dir.file("good.bpe"));
    CHECK_THROWS_AS(t = Tokenizer::load(dir.file("bad.bpe")), ValueError);
    CHECK(t == wikipedia_tokenizer());
    CHECK(t.encode("aaab") == TokenIds{258});
}

TEST_CASE("text/tokenizer: a script's catch (xgrad::ValueError&) catches a bad file and a bad merge count, "
          "catch (xgrad::IndexError&) an unknown ID", "[text][regression]") {
    // As a training script writes it: xgrad's error classes, whether the tokenizer or a tensor op threw.
    TempDir dir;
    const auto caught_as_value_error = [](const std::function<void()>& fn) {
        try {
            fn();
        } catch (const xgrad::ValueError& e) {
            return std::string(e.what());
        } catch (...) {
        }
        return std::string("not caught as xgrad::ValueError");
    };
    write_bytes(dir.file("bad.bpe"), with_crc("xgrad-bpe 1\npattern a\nmerges lots\n"));
    CHECK_THAT(caught_as_value_error([&] { Tokenizer::load(dir.file("bad.bpe")); }),
               Contains("line 3") && Contains("merges count"));
    write_bytes(dir.file("damaged.bpe"), "xgrad-bpe 1\ncrc32 00000000\n");
    CHECK_THAT(caught_as_value_error([&] { Tokenizer::load(dir.file("damaged.bpe")); }), Contains("checksum"));
    CHECK_THAT(caught_as_value_error([] { Tokenizer({{97, 300}}); }), Contains("merge 0 (97, 300)"));
    CHECK_THAT(caught_as_value_error([] { train("abab", 1000); }), Contains("allows only"));
    CHECK_THAT(caught_as_value_error([] { train("abab", 255); }), Contains("vocab_size 255"));
    std::string index_message = "not caught as xgrad::IndexError";
    try {
        wikipedia_tokenizer().decode({97, 5000});
    } catch (const xgrad::IndexError& e) {
        index_message = e.what();
    } catch (...) {
    }
    CHECK_THAT(index_message, Contains("ids[1] = 5000"));
}

}  // namespace xgrad::text::tokenizer_file_tests
