// tests/nn/test_serialize_checksum.cpp — the CRC-32 over every byte of a safetensors file
// (nn/serialize.hpp): flipped bits in the data and in the header, edits that keep the JSON
// valid, a deleted, renamed or misplaced checksum, and the opt-in for other tools' files.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"
#include "nn/serialize_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

TEST_CASE("ckpt checksum: a flipped byte in tensor data is refused", "[ckpt][serialize][checksum][regression]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    Pair source;
    source.w.mutable_data()(0) = 3;
    source.save(path);
    const std::string bytes = read_bytes(path);
    Pair m;
    for (std::size_t back : {std::size_t(1), std::size_t(8)}) {  // in w[1], then in w[0]
        std::string bad = bytes;
        bad[bad.size() - back] = static_cast<char>(bad[bad.size() - back] ^ 0x01);
        write_bytes(path, bad);
        const std::string msg = message_of<ValueError>([&] { m.load(path); });
        CHECK_THAT(msg, Contains("load_safetensors") && Contains("CRC-32") && Contains("w.safetensors"));
        REQUIRE(m.w.data()(0) == 1);
        REQUIRE(m.w.data()(1) == 2);
    }
    write_bytes(path, bytes);
    m.load(path);
    REQUIRE(m.w.data()(0) == 3);
}

TEST_CASE("ckpt checksum: header edits that used to load silently are refused", "[ckpt][serialize][checksum][regression]") {
    TempDir dir;
    const std::string path = dir.file("ab.safetensors");
    nn::save_safetensors(path, {{"a", Tensor({1, 2})}, {"b", Tensor({3, 4})}}, {{"train.step", "5"}});
    const std::string bytes = read_bytes(path);
    auto refused = [&](std::string edited) {
        write_bytes(path, edited);
        return message_of<ValueError>([&] { nn::load_safetensors(path); });
    };
    auto replace = [](std::string s, const std::string& from, const std::string& to) {
        const std::size_t at = s.find(from);
        REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    // a and b exchanged: the same header length, valid JSON, a valid data section.
    std::string swapped = replace(bytes, "[0,8]", "[8,X]");
    swapped = replace(replace(swapped, "[8,16]", "[0,8]"), "[8,X]", "[8,16]");
    CHECK_THAT(refused(swapped), Contains("ab.safetensors") && Contains("corrupted"));
    CHECK_THAT(refused(replace(bytes, "\"5\"", "\"6\"")), Contains("corrupted"));  // train.step 6
    // The checksum's own key renamed by one bit: a damaged stamp, refused even with the opt-in.
    CHECK_THAT(refused(replace(bytes, "xgrad.crc32", "xgrad.crc33")), Contains("corrupted") && Contains("stamp"));
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(path, kUnchecked); }), Contains("stamp"));
    // Deleted (the JSON rewritten without it): no checksum, refused unless the caller opts in.
    std::uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    header["__metadata__"].erase("xgrad.crc32");
    const std::string unstamped = st_file(header.dump(), bytes.substr(8 + n));
    CHECK_THAT(refused(unstamped), Contains("no xgrad checksum") && Contains("require_checksum(false)"));
    // The opt-in loads a file without a checksum, but still verifies one that is there.
    const nn::SafetensorsFile f = nn::load_safetensors(path, kUnchecked);
    REQUIRE(f.metadata == nn::Metadata{{"train.step", "5"}});
    REQUIRE(f.tensors.size() == 2);
    REQUIRE(bits_equal(f.tensors[1].second, Tensor({3, 4})));
    write_bytes(path, swapped);
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(path, kUnchecked); }), Contains("corrupted"));
    write_bytes(path, bytes);
    REQUIRE(bits_equal(nn::load_safetensors(path).tensors.at(0).second, Tensor({1, 2})));
}

TEST_CASE("ckpt checksum: a file written by Python loads with the opt-in", "[ckpt][serialize][checksum][regression]") {
    // tests/reference/make_gpt_reference.py wrote it, as safetensors.torch.save_file would: no checksum.
    const std::string path = std::string(XGRAD_REFERENCE_DIR) + "/gpt_reference.safetensors";
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(path); }),
               Contains("gpt_reference.safetensors") && Contains("no xgrad checksum") &&
                   Contains("nn::LoadOptions().require_checksum(false)"));
    const nn::SafetensorsFile f = nn::load_safetensors(path, kUnchecked);
    REQUIRE(f.tensors.size() > 10);
    REQUIRE(f.metadata.count("xgrad.crc32") == 0);
}

TEST_CASE("ckpt checksum: every bit flip of a file is refused", "[ckpt][serialize][checksum][regression]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    nn::save_safetensors(path, {{"w", Tensor({1, 2})}}, {{"format", "pt"}});
    const std::string bytes = read_bytes(path);
    // With the opt-in too: it admits files without a stamp, not xgrad's with a damaged one.
    for (const nn::LoadOptions& options : {nn::LoadOptions(), kUnchecked}) {
        std::size_t refused = 0;
        for (std::size_t i = 0; i < bytes.size(); ++i)
            for (int bit = 0; bit < 8; ++bit) {
                std::string flipped = bytes;
                flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
                write_bytes(path, flipped);
                try {
                    nn::load_safetensors(path, options);
                } catch (const ValueError&) {
                    ++refused;
                }
            }
        REQUIRE(refused == 8 * bytes.size());
    }
}

TEST_CASE("ckpt checksum: a checksum key away from the stamp is refused, even with the opt-in",
          "[ckpt][serialize][checksum][regression]") {
    TempDir dir;
    const std::string path = dir.file("moved.safetensors");
    write_bytes(path, st_file(R"({"__metadata__":{"k":"v","xgrad.crc32":"00000000"},)"
                              R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')));
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(path, kUnchecked); }),
               Contains("moved.safetensors") && Contains("not as the header's first entry"));
}
