// tests/data/test_shards.cpp — data/shards: llm.c's header byte by byte, uint16 and uint32 round
// trips, every refusal of write_shard and of TokenShard's open by its message, a moved shard, and
// the 90/10 split into two shards.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/data/shards.hpp>
#include "test_helpers.hpp"

namespace test_data_shards {
using namespace xgrad::testing;
using namespace xgrad::data;
using Ids = std::vector<std::int64_t>;

// Byte i of `bytes` as a number.
int byte_at(const std::string& bytes, std::size_t i) { return static_cast<unsigned char>(bytes.at(i)); }

TEST_CASE("write_shard: the header and tokens of a small shard, byte by byte, as llm.c lays them out",
          "[data][shards]") {
    TempDir dir;
    const std::string path = dir.file("tiny.bin");
    write_shard(path, Ids{3, 1, 4, 1, 5, 300}, /*V=*/301);
    const std::string bytes = read_bytes(path);
    REQUIRE(bytes.size() == 1024 + 6 * 2);  // 256 int32, then 6 uint16
    // header[0] = 20240520 = 0x0134D888 → 88 D8 34 01 (little-endian)
    CHECK(byte_at(bytes, 0) == 0x88);
    CHECK(byte_at(bytes, 1) == 0xD8);
    CHECK(byte_at(bytes, 2) == 0x34);
    CHECK(byte_at(bytes, 3) == 0x01);
    // header[1] = 1 (version: uint16 tokens); header[2] = 6 tokens; header[3] = V 301 = 0x012D
    const std::vector<int> next{1, 0, 0, 0, 6, 0, 0, 0, 0x2D, 0x01, 0, 0};
    for (std::size_t i = 0; i < next.size(); ++i) CHECK(byte_at(bytes, 4 + i) == next[i]);
    for (std::size_t i = 16; i < 1024; ++i) REQUIRE(byte_at(bytes, i) == 0);  // header[4..255]
    // the tokens: 3 1 4 1 5 300 (300 = 0x012C → 2C 01)
    const std::vector<int> tokens{3, 0, 1, 0, 4, 0, 1, 0, 5, 0, 0x2C, 0x01};
    for (std::size_t i = 0; i < tokens.size(); ++i) CHECK(byte_at(bytes, 1024 + i) == tokens[i]);
}

TEST_CASE("TokenShard: a uint16 round trip, up to V = 65,536", "[data][shards]") {
    TempDir dir;
    const Ids ids{0, 65535, 7, 65534, 1};
    write_shard(dir.file("a.bin"), ids, 65536);
    const TokenShard shard(dir.file("a.bin"), 65536);
    CHECK(shard.size() == 5);
    CHECK(shard.bytes_per_token() == 2);
    CHECK(shard.vocab_size() == 65536);
    CHECK(shard.view().to_vector() == ids);
    CHECK(shard[1] == 65535);
    CHECK(shard.at(4) == 1);
    CHECK(shard.view(1, 4).to_vector() == Ids{65535, 7, 65534});
    CHECK(message_of<xgrad::IndexError>([&] { shard.at(5); }) ==
          "TokenShard::at: '" + dir.file("a.bin") + "': position 5 out of range [0, 5)");
    CHECK(message_of<xgrad::IndexError>([&] { shard.view(3, 6); }) == "TokenView::slice: tokens [3, 6) outside [0, 5]");
}

TEST_CASE("TokenShard: a uint32 round trip for V = 70,000 (LLaMA-3's magic and version)", "[data][shards]") {
    TempDir dir;
    const Ids ids{69999, 65536, 0, 12345, 65535};
    write_shard(dir.file("w.bin"), ids, 70000);
    const std::string bytes = read_bytes(dir.file("w.bin"));
    REQUIRE(bytes.size() == 1024 + 5 * 4);
    // header[0] = 20240801 = 0x0134D9A1 → A1 D9 34 01; header[1] = 7
    CHECK((byte_at(bytes, 0) == 0xA1 && byte_at(bytes, 1) == 0xD9 && byte_at(bytes, 2) == 0x34 && byte_at(bytes, 3) == 1));
    CHECK((byte_at(bytes, 4) == 7 && byte_at(bytes, 8) == 5));
    // 69999 = 0x0001116F → 6F 11 01 00
    CHECK((byte_at(bytes, 1024) == 0x6F && byte_at(bytes, 1025) == 0x11 && byte_at(bytes, 1026) == 0x01 &&
           byte_at(bytes, 1027) == 0));
    const TokenShard shard(dir.file("w.bin"), 70000);
    CHECK(shard.bytes_per_token() == 4);
    CHECK(shard.vocab_size() == 70000);
    CHECK(shard.view().to_vector() == ids);
}

TEST_CASE("write_shard refuses a bad V or id by position and value, and leaves no file", "[data][shards]") {
    TempDir dir;
    const std::string path = dir.file("bad.bin");
    CHECK(message_of<xgrad::IndexError>([&] { write_shard(path, Ids{1, 2, 10, 3}, 10); }) ==
          "write_shard: '" + path + "': id 10 at position 2 out of range [0, 10)");
    CHECK(message_of<xgrad::IndexError>([&] { write_shard(path, Ids{1, -1}, 10); }) ==
          "write_shard: '" + path + "': id -1 at position 1 out of range [0, 10)");
    CHECK(message_of<xgrad::ValueError>([&] { write_shard(path, Ids{0}, 0); }) ==
          "write_shard: '" + path + "': vocabulary size V 0 outside [1, 2^32 = 4294967296]");
    CHECK_THAT(message_of<xgrad::ValueError>([&] { write_shard(path, Ids{0}, (std::int64_t(1) << 32) + 1); }),
               Catch::Contains("V 4294967297 outside [1, 2^32"));
    CHECK(dir.listing().empty());  // no shard and no temporary left
}

// A valid shard of ids {1, 9, 2} (V 10) at `path`, then `edit` applied to its bytes.
template <class Edit>
void write_edited(const std::string& path, Edit edit) {
    write_shard(path, Ids{1, 9, 2}, 10);
    std::string bytes = read_bytes(path);
    edit(bytes);
    write_bytes(path, bytes);
}

TEST_CASE("TokenShard refuses a malformed file by name", "[data][shards]") {
    TempDir dir;
    const std::string p = dir.file("s.bin");
    auto refusal = [&](std::int64_t V = 10) { return message_of<std::runtime_error>([&] { TokenShard s(p, V); }); };
    SECTION("not a regular file") {
        CHECK(message_of<std::runtime_error>([&] { TokenShard s(dir.path.string(), 10); }) ==
              "TokenShard: '" + dir.path.string() + "' is a directory, not a shard file");
    }
    SECTION("shorter than the header") {
        write_bytes(p, std::string(100, '\0'));
        CHECK(refusal() == "TokenShard: '" + p + "' has 100 bytes, shorter than the 1024-byte header");
    }
    SECTION("a wrong magic") {
        write_edited(p, [](std::string& b) { b[0] = 0x11; });  // 20240520 − 0x88 + 0x11 = 20240401
        CHECK(refusal() == "TokenShard: '" + p + "' has magic 20240401; a shard starts with 20240520 (uint16 tokens) "
                                                 "or 20240801 (uint32 tokens)");
    }
    SECTION("an unknown version") {
        write_edited(p, [](std::string& b) { b[4] = 7; });  // the uint32 version under the uint16 magic
        CHECK(refusal() == "TokenShard: '" + p + "' has version 7; magic 20240520 has version 1 only");
    }
    SECTION("truncated") {
        write_edited(p, [](std::string& b) { b.pop_back(); });
        CHECK(refusal() == "TokenShard: '" + p + "' has 1029 bytes, but its header counts 3 tokens of 2 bytes: "
                                                 "1024 + 3·2 = 1030 bytes (truncated)");
    }
    SECTION("trailing bytes") {
        write_edited(p, [](std::string& b) { b += "xx"; });
        CHECK(refusal() == "TokenShard: '" + p + "' has 1032 bytes, but its header counts 3 tokens of 2 bytes: "
                                                 "1024 + 3·2 = 1030 bytes (trailing bytes)");
    }
    SECTION("written for a larger V than the caller expects") {
        write_edited(p, [](std::string&) {});
        CHECK(refusal(5) == "TokenShard: '" + p + "' was written for V 10 (header[3]), above the V 5 it is opened for");
    }
    SECTION("an id ≥ V in a shard that records no V (as llm.c writes them)") {
        write_edited(p, [](std::string& b) { b[12] = 0; });  // header[3] = 0
        CHECK(message_of<xgrad::IndexError>([&] { TokenShard s(p, 5); }) ==
              "TokenShard: '" + p + "': id 9 at position 1 out of range [0, 5)");
        const TokenShard ok(p, 10);  // the same file for V 10: every id fits, V is the caller's
        CHECK(ok.vocab_size() == 10);
        CHECK(ok.view().to_vector() == Ids{1, 9, 2});
    }
}

TEST_CASE("TokenShard moves: the map goes with it", "[data][shards]") {
    TempDir dir;
    write_shard(dir.file("m.bin"), Ids{4, 5, 6}, 8);
    TokenShard a(dir.file("m.bin"), 8);
    TokenShard b(std::move(a));
    CHECK(a.size() == 0);  // NOLINT(bugprone-use-after-move): a moved-from shard is empty
    CHECK(b.view().to_vector() == Ids{4, 5, 6});
    write_shard(dir.file("n.bin"), Ids{7}, 8);
    TokenShard c(dir.file("n.bin"), 8);
    c = std::move(b);
    CHECK(c.view().to_vector() == Ids{4, 5, 6});
    CHECK(c.path() == dir.file("m.bin"));
}

TEST_CASE("split_ids: 90/10, and the error for a text shorter than one block", "[data][shards]") {
    const Ids ids(100, 0);
    const Split s = split_ids(ids, /*block=*/9, "t.txt");  // val = 10 = block + 1: just enough
    REQUIRE(s.train.size() == 90);
    REQUIRE(s.val.size() == 10);
    CHECK(message_of<std::runtime_error>([&] { split_ids(ids, 10, "t.txt"); }) ==
          "t.txt: the text has 100 characters: train 90 and validation 10 (the last 10%), but each needs at least one "
          "window of block + 1 = 11 characters; give a text of at least 110 characters or a smaller --block-size");
}

TEST_CASE("split_ids: a block below 1 is refused, not wrapped to a huge window", "[data][shards]") {
    const std::vector<std::int64_t> ids(100, 1);
    for (int block : {0, -1, -2})
        CHECK(message_of<xgrad::ValueError>([&] { split_ids(ids, block, "t.txt"); }) ==
              fmt::format("t.txt: block {} must be at least 1", block));
}

TEST_CASE("write_train_val_shards: the first ⌊9N/10⌋ ids and the rest", "[data][shards]") {
    TempDir dir;
    Ids ids(25);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int64_t(i);
    const SplitCounts n = write_train_val_shards(dir.file("train.bin"), dir.file("val.bin"), ids, 25, 1, "ids");
    CHECK((n.train == 22 && n.val == 3));  // ⌊9·25/10⌋ = 22
    CHECK(TokenShard(dir.file("train.bin"), 25).view().to_vector() == Ids(ids.begin(), ids.begin() + 22));
    CHECK(TokenShard(dir.file("val.bin"), 25).view().to_vector() == Ids{22, 23, 24});
    CHECK_THROWS_WITH(write_train_val_shards(dir.file("t2.bin"), dir.file("v2.bin"), ids, 25, 3, "ids"),
                      Catch::Contains("validation 3"));
}

}  // namespace test_data_shards
