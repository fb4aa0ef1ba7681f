// tests/nn/test_serialize.cpp — safetensors files (nn/serialize.hpp): round trip, byte layout,
// atomic writes (concurrent, failed and crashed saves), hand-made files, hostile files (truncated,
// corrupted, trailing bytes after the JSON, shapes whose size overflows, not a regular file),
// where a save writes (through symlinks, never over a FIFO, device or directory), and a header
// over the loader's 100 MB, refused at save. The checksum over every byte: test_serialize_checksum.cpp.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/core/parse.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"
#include "nn/serialize_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;
namespace fs = std::filesystem;

namespace {

std::string f32_bytes(const std::vector<float>& v) {
    std::string s(v.size() * 4, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
}

void load_unchecked(nn::Module& m, const std::string& path) { m.load(path, kUnchecked); }

// One (2, 2) parameter "w" = [[1, 2], [3, 4]], the target of the hand-made corrupted files.
struct Single : nn::Module {
    Tensor w;
    Single() { w = register_parameter("w", Tensor({{1, 2}, {3, 4}})); }
};

// The valid file for Single: w = [[9, 8], [7, 6]].
const std::string kValidHeader = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

const std::string kValidData = f32_bytes({9, 8, 7, 6});

}  // namespace

// =============================================================================================
// safetensors files
// =============================================================================================

TEST_CASE("save then load is bit-exact", "[nn][serialize]") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    manual_seed(10);
    TinyNet a;
    manual_seed(11);
    TinyNet b;
    a.save(path);
    b.load(path);
    const NamedTensors pa = a.named_parameters(), pb = b.named_parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) {
        REQUIRE(pa[i].second.shape() == pb[i].second.shape());
        for (std::int64_t j = 0; j < pa[i].second.numel(); ++j)
            REQUIRE(pa[i].second.data().data()[j] == pb[i].second.data().data()[j]);
    }
    // Values that a text format would mangle survive bit for bit: -0, the smallest
    // subnormal, the largest float, ±inf and a NaN.
    a.emb->weight.mutable_data()(0, 0) = -0.0f;
    a.emb->weight.mutable_data()(0, 1) = std::numeric_limits<real>::denorm_min();
    a.emb->weight.mutable_data()(0, 2) = std::numeric_limits<real>::max();
    a.emb->weight.mutable_data()(1, 0) = kInf;
    a.emb->weight.mutable_data()(1, 1) = -kInf;
    a.emb->weight.mutable_data()(1, 2) = kNaN;
    a.save(path);
    b.load(path);
    for (std::size_t i = 0; i < pa.size(); ++i) REQUIRE(bits_equal(pa[i].second, pb[i].second));
    REQUIRE(std::signbit(b.emb->weight.at({0, 0})));

    // load_safetensors gives the tensors in file order and the metadata.
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    REQUIRE(f.tensors.size() == 3);
    REQUIRE(f.tensors[0].first == "emb.weight");
    REQUIRE(f.tensors[1].first == "fc.weight");
    REQUIRE(f.tensors[2].first == "fc.bias");
    REQUIRE(f.metadata == nn::Metadata{{"format", "pt"}});
}

TEST_CASE("the file layout is the safetensors format", "[nn][serialize]") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    TinyNet net;
    net.save(path);
    const std::string bytes = read_bytes(path);

    REQUIRE(bytes.size() >= 8);
    std::uint64_t n = 0;  // little-endian u64, assembled byte by byte (independent of the host)
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    REQUIRE(n % 8 == 0);  // the data starts 8-byte aligned
    REQUIRE(bytes.size() == 8 + n + (15 + 6 + 2) * 4);

    const std::string text = bytes.substr(8, n);
    const std::size_t last = text.find_last_not_of(' ');
    REQUIRE(text[last] == '}');  // padding is spaces only, after the JSON
    const nlohmann::json h = nlohmann::json::parse(text);
    REQUIRE(h.size() == 4);  // three tensors and __metadata__
    // __metadata__ first, the checksum first in it, its 8 digits at file bytes [40, 48): the
    // CRC-32 of every other byte of the file (recomputed here bit by bit: reflected polynomial
    // 0xEDB88320, initial and final XOR 0xFFFFFFFF), then the caller's metadata.
    REQUIRE(text.substr(0, 32) == R"({"__metadata__":{"xgrad.crc32":")");
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < bytes.size(); i = i + 1 == 40 ? 48 : i + 1) {
        crc ^= static_cast<unsigned char>(bytes[i]);
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    REQUIRE(bytes.substr(40, 9) == fmt::format("{:08x}\"", ~crc));
    REQUIRE(h.at("__metadata__") == nlohmann::json{{"xgrad.crc32", bytes.substr(40, 8)}, {"format", "pt"}});
    auto require_entry = [&](const std::string& name, std::vector<std::size_t> shape, std::size_t begin,
                             std::size_t end) {
        INFO(name);
        REQUIRE(h.at(name).at("dtype") == "F32");
        REQUIRE(h.at(name).at("shape").get<std::vector<std::size_t>>() == shape);
        REQUIRE(h.at(name).at("data_offsets").get<std::vector<std::size_t>>() == std::vector<std::size_t>{begin, end});
        REQUIRE(h.at(name).size() == 3);
    };
    // Data in registration order, back to back: 15, 6 and 2 floats.
    require_entry("emb.weight", {5, 3}, 0, 60);
    require_entry("fc.weight", {2, 3}, 60, 84);
    require_entry("fc.bias", {2}, 84, 92);
    // The raw bytes are the row-major float32 values.
    const char* data = bytes.data() + 8 + n;
    REQUIRE(std::memcmp(data, net.emb->weight.data().data(), 60) == 0);
    REQUIRE(std::memcmp(data + 60, net.fc->weight.data().data(), 24) == 0);
    REQUIRE(std::memcmp(data + 84, net.fc->bias.data().data(), 8) == 0);
}

TEST_CASE("save is atomic: no temporary files remain - an existing file is replaced", "[nn][serialize]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    write_bytes(path, "an old, unrelated file");
    manual_seed(20);
    TinyNet a;
    a.save(path);
    REQUIRE(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
    TinyNet b;
    b.load(path);
    REQUIRE(bits_equal(a.fc->weight, b.fc->weight));
    a.save(path);  // over a valid checkpoint
    REQUIRE(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});

    // Failures throw std::runtime_error and leave no temporary file behind.
    CHECK_THAT(message_of<std::runtime_error>([&] { a.save(dir.file("no/such/dir/x.safetensors")); }),
               Contains("save_safetensors") && Contains("no/such/dir"));
    fs::create_directory(dir.path / "a_directory");
    CHECK_THAT(message_of<std::runtime_error>([&] { a.save(dir.file("a_directory")); }),
               Contains("save_safetensors"));
    REQUIRE(dir.listing() == std::vector<std::string>{"a_directory", "ckpt.safetensors"});
    REQUIRE(fs::is_empty(dir.path / "a_directory"));
}

TEST_CASE("save_safetensors refuses bad names and undefined tensors", "[nn][serialize][regression]") {
    TempDir dir;
    const std::string path = dir.file("x.safetensors");
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}}); }),
               Contains("duplicate") && Contains("'a'"));
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors(path, {{"", ones({1})}}); }),
               Contains("invalid tensor name"));
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors(path, {{"__metadata__", ones({1})}}); }),
               Contains("invalid tensor name"));
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors(path, {{"u", Tensor()}}); }),
               Contains("'u' is undefined"));
    // JSON strings are UTF-8: a name with a stray byte 0xff cannot be written.
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors(path, {{"bad\xff", ones({1})}}); }),
               Contains("save_safetensors") && Contains("UTF-8"));
    REQUIRE(dir.listing().empty());
    // Empty tensors and an empty dict are fine.
    nn::save_safetensors(path, {{"empty", zeros({0, 3})}});
    const auto f = nn::load_safetensors(path);
    REQUIRE(f.tensors.size() == 1);
    REQUIRE(f.tensors[0].second.shape() == Shape{0, 3});
    nn::save_safetensors(path, {});
    REQUIRE(nn::load_safetensors(path).tensors.empty());
}

TEST_CASE("save_safetensors_arrays writes the file save_safetensors writes, from arrays, and refuses a null one",
          "[nn][serialize]") {
    TempDir dir;
    const Tensor a23({{1, 2, 3}, {4, 5, 6}}), b = zeros({0, 2});
    nn::save_safetensors(dir.file("t.safetensors"), {{"a", a23}, {"b", b}}, {{"k", "v"}});
    nn::save_safetensors_arrays(dir.file("r.safetensors"), {{"a", &a23.data()}, {"b", &b.data()}}, {{"k", "v"}});
    CHECK(read_bytes(dir.file("r.safetensors")) == read_bytes(dir.file("t.safetensors")));
    const std::string refused = dir.file("n.safetensors");
    CHECK_THAT(message_of<ValueError>([&] { nn::save_safetensors_arrays(refused, {{"n", nullptr}}); }),
               Contains("save_safetensors: array 'n' is null"));
    CHECK(!fs::exists(refused));
}

TEST_CASE("a hand-made file loads - F64 data is converted", "[nn][serialize]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    Single m;
    write_bytes(path, st_file(kValidHeader, kValidData));
    CHECK_THAT(message_of<ValueError>([&] { m.load(path); }),
               Contains("no xgrad checksum") && Contains("nn::LoadOptions().require_checksum(false)"));
    require_values(m.w, {{1, 2}, {3, 4}}, 0);
    load_unchecked(m, path);
    require_values(m.w, {{9, 8}, {7, 6}}, 0);

    // F64 (e.g. written by the double build) into the float model.
    std::string d64(32, '\0');
    const double v[] = {0.5, -1.25, 3, 1e-3};
    std::memcpy(d64.data(), v, 32);
    write_bytes(path, st_file(R"({"__metadata__":{"k":"v"},"w":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]}})", d64));
    load_unchecked(m, path);
    require_values(m.w, {{0.5, -1.25}, {3, 1e-3}}, 0);
}

TEST_CASE("hostile: truncated files throw and leave the model untouched", "[nn][serialize][hostile]") {
    TempDir dir;
    const std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
    manual_seed(30);
    TinyNet source;
    source.save(good);
    const std::string bytes = read_bytes(good);
    std::uint64_t n;
    std::memcpy(&n, bytes.data(), 8);

    manual_seed(31);
    TinyNet net;
    const Snapshot before = snapshot(net);
    // Cut inside the length, inside the header, at the data's start, inside the data, one
    // byte short of the end.
    for (std::size_t cut : {std::size_t(0), std::size_t(4), std::size_t(8), std::size_t(8 + n / 2),
                            std::size_t(8 + n), std::size_t(8 + n + 30), bytes.size() - 1}) {
        INFO("file cut to " << cut << " of " << bytes.size() << " bytes");
        write_bytes(bad, bytes.substr(0, cut));
        const std::string msg = message_of<ValueError>([&] { net.load(bad); });
        CHECK_THAT(msg, Contains("load_safetensors") && Contains("bad.safetensors"));
        require_unchanged(net, before);
    }
    // One byte too many is not a valid file either: the checksum sees it first; in a file without
    // one, the data must end where the offsets say.
    write_bytes(bad, bytes + "x");
    CHECK_THAT(message_of<ValueError>([&] { net.load(bad); }), Contains("corrupted or truncated"));
    write_bytes(bad, st_file(kValidHeader, kValidData + "x"));
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(bad, kUnchecked); }), Contains("1 trailing byte"));
    require_unchanged(net, before);
}

TEST_CASE("hostile: corrupted headers throw a ValueError naming the problem", "[nn][serialize][hostile][regression]") {
    TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    Single m;
    const Snapshot before = snapshot(m);
    auto expect_error = [&](const std::string& file_bytes, const std::string& needle) {
        write_bytes(path, file_bytes);
        const std::string msg = message_of<ValueError>([&] { load_unchecked(m, path); });
        CHECK_THAT(msg, Contains("load_safetensors") && Contains(needle));
        require_unchanged(m, before);
    };
    const std::string& D = kValidData;

    SECTION("garbage JSON") { expect_error(st_file(R"({"w": {"dtype": "F32",)", D), "not valid JSON"); }
    SECTION("binary garbage") { expect_error(st_file(std::string("\x01\x02\xff\xfe garbage", 12), D), "not valid JSON"); }
    SECTION("header is not an object") { expect_error(st_file("[1, 2, 3]", D), "not a JSON object"); }
    SECTION("empty header") { expect_error(st_file("", D, 0), "not valid JSON"); }
    SECTION("wrong dtype") {
        expect_error(st_file(R"({"w":{"dtype":"I64","shape":[2,2],"data_offsets":[0,16]}})", D), "dtype I64");
        expect_error(st_file(R"({"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})", D.substr(0, 8)),
                     "dtype F16");
    }
    SECTION("dtype is not a string") {
        expect_error(st_file(R"({"w":{"dtype":32,"shape":[2,2],"data_offsets":[0,16]}})", D), "lacks dtype");
    }
    SECTION("missing data_offsets") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2]}})", D), "lacks dtype, shape or data_offsets");
    }
    SECTION("three data_offsets") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8,16]}})", D), "lacks");
    }
    SECTION("offsets past the end") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,32]}})", D),
                     "spans bytes [0, 32) but the data section has 16 bytes");
    }
    SECTION("reversed offsets") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})", D), "spans bytes [16, 0)");
    }
    SECTION("negative offset") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[-16,0]}})", D), "invalid data_offsets");
    }
    SECTION("shape and offsets disagree") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", D),
                     "shape (2, 3) F32 needs 24 bytes but data_offsets give 16");
    }
    SECTION("a shape whose byte size overflows") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904,2],"data_offsets":[0,16]}})", D),
                     "too large");
        expect_error(st_file(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,16]}})", D),
                     "too large");
    }
    SECTION("negative or fractional size") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]}})", D), "negative size");
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2.0,2],"data_offsets":[0,16]}})", D), "non-integer");
    }
    SECTION("huge header length") {
        expect_error(st_file(kValidHeader, D, std::uint64_t(1) << 40), "declares a 1099511627776-byte header");
        expect_error(st_file(kValidHeader, D, ~std::uint64_t(0)), "limit 100 MB");
        // Within the 100 MB limit but longer than the file.
        expect_error(st_file(kValidHeader, D, 1000), "declares a 1000-byte header");
    }
    SECTION("duplicate names") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                             D + f32_bytes({1, 2})),
                     "duplicate");
    }
    SECTION("overlapping tensors") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                             R"("v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             D),
                     "overlap");
    }
    SECTION("a gap between tensors") {
        expect_error(st_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})", f32_bytes({0, 0}) + D),
                     "gap");
    }
    SECTION("metadata that is not string to string") {
        expect_error(st_file(R"({"__metadata__":{"epoch":3},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", D),
                     "metadata 'epoch' is not a string");
        expect_error(st_file(R"({"__metadata__":[1],"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", D),
                     "__metadata__ is not an object");
    }
    SECTION("a file of a different model: names and shapes are checked after parsing") {
        write_bytes(path, st_file(R"({"v":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", D));
        CHECK_THAT(message_of<ValueError>([&] { load_unchecked(m, path); }), Contains("missing parameter 'w'"));
        write_bytes(path, st_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", D));
        CHECK_THAT(message_of<ValueError>([&] { load_unchecked(m, path); }),
                   Contains("'w' has shape (2, 2) in the model but (4)"));
        require_unchanged(m, before);
    }
}

TEST_CASE("hostile: a missing file - a directory or a device throws std::runtime_error", "[nn][serialize][hostile][regression]") {
    TempDir dir;
    Single m;
    const Snapshot before = snapshot(m);
    CHECK_THAT(message_of<std::runtime_error>([&] { m.load(dir.file("nope.safetensors")); }),
               Contains("load_safetensors: cannot open") && Contains("nope.safetensors"));
    CHECK_THAT(message_of<std::runtime_error>([&] { m.load(dir.path.string()); }),
               Contains("load_safetensors") && Contains("not a regular file"));
    // A device would otherwise be read until memory runs out.
    if (fs::exists("/dev/zero")) {
        CHECK_THAT(message_of<std::runtime_error>([&] { m.load("/dev/zero"); }), Contains("not a regular file"));
    }
    require_unchanged(m, before);
}

TEST_CASE("ckpt bug 9: a NUL byte or other trailing bytes in a safetensors header are refused",
          "[ckpt][serialize][parse][regression]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 56 bytes
    const std::string data = f32_bytes({7, 8});
    Pair m;
    // Valid: the JSON then spaces.
    write_bytes(path, st_file(json + std::string(8, ' '), data));
    load_unchecked(m, path);
    REQUIRE(m.w.data()(0) == 7);
    REQUIRE(m.w.data()(1) == 8);

    // A NUL byte ends the JSON for a lenient parser, which then ignores what follows it.
    const std::string bad_headers[] = {json + std::string("\0garbage", 8), json + std::string("       \0", 8),
                                       json + "\n       ", json + "\t       ", " " + json + "       ",
                                       json + "}       "};
    for (const auto& h : bad_headers) {
        INFO("header " << quoted_text(h));
        write_bytes(path, st_file(h, f32_bytes({5, 6})));
        const std::string msg = message_of<ValueError>([&] { load_unchecked(m, path); });
        CHECK_THAT(msg, Contains("load_safetensors") && Contains("w.safetensors"));
        REQUIRE(m.w.data()(0) == 7);  // unchanged
        REQUIRE(m.w.data()(1) == 8);
    }
}

// =============================================================================================
// bug 6: concurrent saves, failed saves, crashed saves
// =============================================================================================

TEST_CASE("ckpt bug 6: concurrent saves to one path never mix two models", "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    // Two "models" of 1 MiB each, all ones and all twos: a mixed file has both values.
    const NamedTensors a{{"w", full({512, 512}, 1)}}, b{{"w", full({512, 512}, 2)}};
    for (int round = 0; round < 20; ++round) {
        INFO("round " << round);
        std::atomic<int> ready{0};
        std::string errors[2];
        auto saver = [&](int i) {
            ready.fetch_add(1);
            while (ready.load() < 2) {  // start both writes together
            }
            try {
                nn::save_safetensors(path, i == 0 ? a : b);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        };
        std::thread t0(saver, 0), t1(saver, 1);
        t0.join();
        t1.join();
        REQUIRE(errors[0].empty());
        REQUIRE(errors[1].empty());
        const nn::SafetensorsFile f = nn::load_safetensors(path);
        REQUIRE(f.tensors.size() == 1);
        const Array& w = f.tensors[0].second.data();
        const real first = w.data()[0];
        REQUIRE((first == 1 || first == 2));
        REQUIRE(std::count(w.begin(), w.end(), first) == static_cast<std::ptrdiff_t>(w.size()));
        REQUIRE(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
    }
}

TEST_CASE("ckpt bug 6: a save that fails while writing removes its temporary file", "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string path = dir.file("big.safetensors");
    // Files may grow to 64 KiB only, so writing a 1 MiB tensor fails with EFBIG (SIGXFSZ,
    // which would kill the process, is ignored meanwhile).
    struct rlimit old_limit {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    struct rlimit small = old_limit;
    small.rlim_cur = 64 * 1024;
    auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string msg;
    try {
        nn::save_safetensors(path, {{"w", full({512, 512}, 1)}});
    } catch (const std::runtime_error& e) {
        msg = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
    CHECK_THAT(msg, Contains("save_safetensors") && Contains("big.safetensors"));
    REQUIRE(dir.listing().empty());
}

TEST_CASE("ckpt bug 6: temporary files of crashed saves are cleaned on the next save to that path",
          "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    // A pid that is certainly dead: a child that has exited and been reaped.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
    const std::vector<std::string> stale{"ckpt.safetensors.tmp-" + dead,  // the old naming
                                         "ckpt.safetensors.tmp-" + dead + "-3"};
    const std::vector<std::string> kept{"ckpt.safetensors.tmp-" + alive + "-999999",  // a live writer's
                                        "ckpt.safetensors.tmp-notapid",               // not ours
                                        "ckpt.safetensors.tmp-" + dead + "-3x",        // not ours
                                        "other.safetensors.tmp-" + dead + "-1"};       // another path
    for (const auto& name : stale) write_bytes(dir.file(name), std::string(100, 'x'));
    for (const auto& name : kept) write_bytes(dir.file(name), std::string(100, 'x'));
    nn::save_safetensors(path, {{"w", ones({2})}});
    std::vector<std::string> expected = kept;
    expected.push_back("ckpt.safetensors");
    std::sort(expected.begin(), expected.end());
    REQUIRE(dir.listing() == expected);
}

// =============================================================================================
// checksum of the data section
// =============================================================================================

TEST_CASE("bug 1: a safetensors header with shape (0 2^62 4) is refused", "[reliability][bug1][regression]") {
    const std::string header = R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})";
    const std::string path = "reliability_core_bug1.safetensors";
    {
        std::ofstream f(path, std::ios::binary);
        const std::uint64_t n = header.size();
        for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));  // little-endian u64
        f << header;
    }
    CHECK_THAT(message_of<ValueError>([&] { nn::load_safetensors(path, kUnchecked); }), Contains("too large"));
    std::remove(path.c_str());
}

// =============================================================================================
// where a save writes: through symlinks, never over a non-file
// =============================================================================================

namespace {

// A file of one tensor "w" (2,) = {a, b}.
void save_pair(const std::string& path, real a, real b) { nn::save_safetensors(path, {{"w", Tensor({a, b})}}); }

std::vector<real> loaded_pair(const std::string& path) {
    const Tensor w = nn::load_safetensors(path).tensors.at(0).second;  // kept: data() refers into it
    return {w.data()(0), w.data()(1)};
}

}  // namespace

TEST_CASE("save through a symlink updates its target and keeps the link and the file's permissions",
          "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string real_path = dir.file("real.safetensors"), latest = dir.file("latest");
    save_pair(real_path, 1, 2);
    const fs::perms private_file = fs::perms::owner_read | fs::perms::owner_write;
    fs::permissions(real_path, private_file);
    fs::create_symlink("real.safetensors", latest);  // relative to the link's directory
    save_pair(latest, 5, 6);
    REQUIRE(fs::is_symlink(latest));
    REQUIRE(fs::read_symlink(latest) == "real.safetensors");
    REQUIRE(loaded_pair(real_path) == std::vector<real>{5, 6});
    REQUIRE((fs::status(real_path).permissions() & fs::perms::all) == private_file);
    REQUIRE(dir.listing() == std::vector<std::string>{"latest", "real.safetensors"});

    // A chain of links, the last one absolute and into another directory: the temporary file
    // goes beside the target, so the rename stays inside one directory.
    TempDir other;
    fs::create_symlink(real_path, other.file("abs"));
    fs::create_symlink("abs", other.file("chain"));
    save_pair(other.file("chain"), 7, 8);
    REQUIRE(loaded_pair(real_path) == std::vector<real>{7, 8});
    REQUIRE(fs::is_symlink(other.file("chain")));
    REQUIRE(fs::is_symlink(other.file("abs")));
    REQUIRE(other.listing() == std::vector<std::string>{"abs", "chain"});
    REQUIRE(dir.listing() == std::vector<std::string>{"latest", "real.safetensors"});

    // A dangling link is written through, as open(path, "wb") does: its target is created.
    fs::create_symlink("fresh.safetensors", dir.file("next"));
    save_pair(dir.file("next"), 3, 4);
    REQUIRE(fs::is_symlink(dir.file("next")));
    REQUIRE(fs::is_regular_file(fs::symlink_status(dir.file("fresh.safetensors"))));
    REQUIRE(loaded_pair(dir.file("fresh.safetensors")) == std::vector<real>{3, 4});

    // A loop of links is an error, not an endless walk.
    fs::create_symlink("loop_b", dir.file("loop_a"));
    fs::create_symlink("loop_a", dir.file("loop_b"));
    CHECK_THAT(message_of<std::runtime_error>([&] { save_pair(dir.file("loop_a"), 0, 0); }),
               Contains("save_safetensors") && Contains("loop_a") && Contains("symbolic links"));
    REQUIRE(fs::is_symlink(dir.file("loop_a")));
}

TEST_CASE("save refuses a FIFO, a directory and a symlink to a directory", "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string fifo = dir.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(message_of<std::runtime_error>([&] { save_pair(fifo, 1, 2); }),
               Contains("save_safetensors") && Contains("pipe'") && Contains("FIFO"));
    REQUIRE(fs::is_fifo(fs::symlink_status(fifo)));

    fs::create_directory(dir.file("folder"));
    CHECK_THAT(message_of<std::runtime_error>([&] { save_pair(dir.file("folder"), 1, 2); }),
               Contains("folder'") && Contains("a directory"));
    fs::create_symlink("folder", dir.file("to_folder"));
    CHECK_THAT(message_of<std::runtime_error>([&] { save_pair(dir.file("to_folder"), 1, 2); }),
               Contains("to_folder'") && Contains("a directory"));
    REQUIRE(fs::is_symlink(dir.file("to_folder")));
    REQUIRE(fs::is_empty(dir.file("folder")));
    REQUIRE(dir.listing() == std::vector<std::string>{"folder", "pipe", "to_folder"});
}

TEST_CASE("save refuses a character device (a private /dev/null)", "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string node = dir.file("null");
    if (::mknod(node.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) != 0) {
        // Catch2 v2 has no SKIP: the warning shows in the output, and CI runs as root.
        WARN("SKIPPED: mknod needs CAP_MKNOD (root): " << std::strerror(errno));
        return;
    }
    CHECK_THAT(message_of<std::runtime_error>([&] { save_pair(node, 1, 2); }),
               Contains("null'") && Contains("character device"));
    REQUIRE(fs::is_character_file(fs::symlink_status(node)));
    REQUIRE(dir.listing() == std::vector<std::string>{"null"});
}

TEST_CASE("save refuses a header over the loader's 100 MB before writing anything", "[ckpt][serialize][regression]") {
    TempDir dir;
    const std::string path = dir.file("big.safetensors");
    save_pair(path, 1, 2);
    const std::string before = read_bytes(path);
    // 100,000,000 bytes of metadata value alone: with its key and the stamp the header is over the limit.
    const nn::Metadata huge{{"notes", std::string(100'000'000, 'x')}};
    const std::string msg = message_of<ValueError>([&] { nn::save_safetensors(path, {{"w", Tensor({3, 4})}}, huge); });
    CHECK_THAT(msg, Contains("save_safetensors: the header of '" + path + "' would be 100000") &&
                        Contains("bytes, over the 100000000 bytes load_safetensors reads"));
    CHECK(read_bytes(path) == before);
    CHECK(dir.listing() == std::vector<std::string>{"big.safetensors"});  // no temporary file either
}

// =============================================================================================
// the checksum covers every byte
// =============================================================================================
