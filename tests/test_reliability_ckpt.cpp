// tests/test_reliability_ckpt.cpp — checkpoint, loader and optimizer reliability: one test per
// failure mode, each with the value or error the fixed code must give (float32 build).
//
//   bug 2   an optimizer step count that overflows Adam after a resume
//   bug 6   concurrent saves to one path; temp files of failed and crashed saves
//   bug 8   a 100,000-deep module tree (walks and destruction without recursion)
//   bug 9   lenient number and header parsing (NUL in the header, "5abc", "0x10", "+1")
//   checksum   the CRC-32 of the data section in __metadata__, verified on load
//   clip_grad_norm_(error_if_nonfinite)
//
// Test names start with "ckpt" and name the bug, so a note can cite them.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "char_mlp/model.hpp"     // the model the checkpoint tests save
#include "common/checkpoint.hpp"  // save_checkpoint / load_checkpoint
#include "core/parse.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::message_of;
using xgrad::testing::TempDir;
using xgrad::testing::read_bytes;
using xgrad::testing::write_bytes;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A safetensors file from a header text (used as is: no padding added) and data bytes.
std::string st_file(const std::string& header, const std::string& data) {
    const std::uint64_t n = header.size();
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);  // x86-64 and arm64 are little-endian
    return out + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
    std::string s(v.size() * 4, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
}

bool bits_equal(const Array& a, const Array& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(real)) == 0;
}

// One (2,) parameter "w" = [1, 2].
struct Single : nn::Module {
    Tensor w;
    Single() { w = register_parameter("w", Tensor({1, 2})); }
};

// An Adam over one (2, 3) parameter "w", stepped once, and its state dict.
struct SteppedAdam {
    Tensor w = from_array(xt::zeros<real>({2, 3}), true);
    optim::Adam opt{NamedTensors{{"w", w}}, optim::AdamOptions(0.01)};
    SteppedAdam() {
        w.set_grad(Tensor({{1, 2, 3}, {4, 5, 6}}));
        opt.step();
    }
};

void require_same_state(const optim::OptimizerState& a, const optim::OptimizerState& b) {
    REQUIRE(a.metadata == b.metadata);
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        REQUIRE(a.tensors[i].first == b.tensors[i].first);
        REQUIRE(bits_equal(a.tensors[i].second.data(), b.tensors[i].second.data()));
    }
}

}  // namespace

// =============================================================================================
// bug 9: strict numbers
// =============================================================================================

TEST_CASE("ckpt bug 9: parse_int64 and parse_double accept one spelling only", "[ckpt][parse]") {
    REQUIRE(try_parse_int64("12") == 12);
    REQUIRE(try_parse_int64("-3") == -3);
    REQUIRE(try_parse_int64("9223372036854775807") == INT64_MAX);
    for (const char* bad : {"", "+1", " 1", "1 ", "5abc", "1e3", "0x10", "1.0", "9223372036854775808", "--1"}) {
        INFO("'" << bad << "'");
        REQUIRE_FALSE(try_parse_int64(bad).has_value());
    }
    REQUIRE(try_parse_double("0.001") == 0.001);
    REQUIRE(try_parse_double("1e-08") == 1e-08);
    REQUIRE(try_parse_double("-2.5") == -2.5);
    REQUIRE(std::isinf(*try_parse_double("inf")));
    for (const char* bad : {"", "+1", " 0.5", "0.5 ", "0x10", "1e400", "1,5", "0.5abc"}) {
        INFO("'" << bad << "'");
        REQUIRE_FALSE(try_parse_double(bad).has_value());
    }
    CHECK_THAT(message_of<ValueError>([] { parse_int64("5abc", "op", "train.step"); }),
               Contains("op: 'train.step' = '5abc' is not a decimal integer"));
    CHECK_THAT(message_of<ValueError>([] { parse_int64("7", "op", "k", 0, 5); }),
               Contains("'k' = '7' is outside [0, 5]"));
    CHECK_THAT(message_of<ValueError>([] { parse_double(std::string("1\0x", 3), "op", "lr"); }),
               Contains("'lr' = '1\\x00x' is not a decimal number"));
}

TEST_CASE("ckpt bug 9: the optimizer refuses lr 0x10 and step counts with a + or spaces",
          "[ckpt][optim][parse]") {
    SteppedAdam a;
    const optim::OptimizerState good = a.opt.state_dict();
    REQUIRE(good.metadata.at("w.step") == "1");
    const struct {
        const char* key;
        const char* value;
    } cases[] = {{"group.0.lr", "0x10"},  {"group.0.lr", " 0.01"},  {"group.0.lr", "0.01 "},
                 {"group.0.lr", "+0.01"}, {"group.0.weight_decay", "0abc"},
                 {"w.step", "+1"},        {"w.step", " 1"},          {"w.step", "1 "},
                 {"w.step", "1e0"},       {"w.step", "0x1"},         {"w.group", "+0"},
                 {"param_groups", "1abc"}, {"beta1", " 0.9"},        {"eps", "0x1p-27"}};
    for (const auto& c : cases) {
        INFO(c.key << " = '" << c.value << "'");
        optim::OptimizerState bad = good;
        bad.metadata[c.key] = c.value;
        const std::string msg = message_of<ValueError>([&] { a.opt.load_state_dict(bad); });
        CHECK_THAT(msg, Contains("Adam.load_state_dict") && Contains(c.key));
        require_same_state(a.opt.state_dict(), good);
    }
}

TEST_CASE("ckpt bug 9: a NUL byte or other trailing bytes in a safetensors header are refused",
          "[ckpt][serialize][parse]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 56 bytes
    const std::string data = f32_bytes({7, 8});
    Single m;
    // Valid: the JSON then spaces.
    write_bytes(path, st_file(json + std::string(8, ' '), data));
    m.load(path);
    REQUIRE(m.w.data()(0) == 7);
    REQUIRE(m.w.data()(1) == 8);

    // A NUL byte ends the JSON for a lenient parser, which then ignores what follows it.
    const std::string bad_headers[] = {json + std::string("\0garbage", 8), json + std::string("       \0", 8),
                                       json + "\n       ", json + "\t       ", " " + json + "       ",
                                       json + "}       "};
    for (const auto& h : bad_headers) {
        INFO("header " << quoted_text(h));
        write_bytes(path, st_file(h, f32_bytes({5, 6})));
        const std::string msg = message_of<ValueError>([&] { m.load(path); });
        CHECK_THAT(msg, Contains("load_safetensors") && Contains("w.safetensors"));
        REQUIRE(m.w.data()(0) == 7);  // unchanged
        REQUIRE(m.w.data()(1) == 8);
    }
}

TEST_CASE("ckpt bug 9: the char_mlp checkpoint refuses train.step 5abc and 1e3 and a bad rng state",
          "[ckpt][char_mlp][parse]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    manual_seed(3);
    char_mlp::CharMLP model(27, 3, 4, 8);
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(3e-3));
    std::mt19937_64 rng(42);
    const examples::RunFlags flags{{"--steps", "10"}};
    examples::save_checkpoint(path, model, opt, 5, rng, flags);
    std::mt19937_64 rng2;
    REQUIRE(examples::load_checkpoint(path, model, opt, rng2, flags) == 5);
    REQUIRE(rng2 == rng);

    // The file with one metadata value replaced (the header is rewritten; data unchanged).
    auto with_meta = [&](const std::string& key, const std::string& value) {
        nn::SafetensorsFile f = nn::load_safetensors(path);
        f.metadata[key] = value;
        const std::string other = dir.file("edited.safetensors");
        nn::save_safetensors(other, f.tensors, f.metadata);
        return other;
    };
    for (const char* step : {"5abc", "1e3", "+5", " 5", "-1", "2147483648", ""}) {
        INFO("train.step = '" << step << "'");
        const std::string bad = with_meta("train.step", step);
        const std::string msg = message_of<std::runtime_error>(
            [&] { examples::load_checkpoint(bad, model, opt, rng2, flags); });
        CHECK_THAT(msg, Contains("train.step"));
    }
    std::ostringstream text;
    text << rng;
    for (const std::string& state : {text.str() + " 1", "+" + text.str(), text.str() + "x"}) {
        const std::string bad = with_meta("train.rng", state);
        const std::string msg = message_of<std::runtime_error>(
            [&] { examples::load_checkpoint(bad, model, opt, rng2, flags); });
        CHECK_THAT(msg, Contains("train.rng"));
    }
}

// =============================================================================================
// bug 2: the step count is bounded where it is read
// =============================================================================================

TEST_CASE("ckpt bug 2: an optimizer step count above 2^53 is refused on load", "[ckpt][optim]") {
    SteppedAdam a;
    const optim::OptimizerState good = a.opt.state_dict();
    for (const char* step : {"9223372036854775807", "9007199254740993", "0", "-1"}) {
        INFO("w.step = " << step);
        optim::OptimizerState bad = good;
        bad.metadata["w.step"] = step;
        const std::string msg = message_of<ValueError>([&] { a.opt.load_state_dict(bad); });
        CHECK_THAT(msg, Contains("'w.step'") && Contains("9007199254740992") && Contains("2^53"));
        require_same_state(a.opt.state_dict(), good);
    }
    // The bound itself is accepted, and a step from there is finite (bias corrections 1).
    optim::OptimizerState edge = good;
    edge.metadata["w.step"] = "9007199254740992";
    a.opt.load_state_dict(edge);
    a.w.set_grad(Tensor({{1, 1, 1}, {1, 1, 1}}));
    a.opt.step();
    for (real v : a.w.data()) REQUIRE(std::isfinite(v));
}

// =============================================================================================
// bug 8: deep module trees
// =============================================================================================

TEST_CASE("ckpt bug 8: a 100000-deep module tree is walked and destroyed without recursion",
          "[ckpt][module]") {
    constexpr int kDepth = 100000;
    struct Node : nn::Module {};
    auto root = std::make_shared<Node>();
    root->register_parameter("b", zeros({1}));
    nn::Module* deepest = root.get();
    for (int i = 0; i < kDepth; ++i) {
        auto child = std::make_shared<Node>();
        deepest->register_module("m", child);
        deepest = child.get();
    }
    Tensor w = deepest->register_parameter("w", Tensor({1, 2}));

    const NamedTensors named = root->named_parameters();  // Module::collect
    REQUIRE(named.size() == 2);
    REQUIRE(named[0].first == "b");
    std::string deep_name;
    for (int i = 0; i < kDepth; ++i) deep_name += "m.";
    REQUIRE(named[1].first == deep_name + "w");
    REQUIRE(named[1].second.impl() == w.impl());
    REQUIRE(root->num_parameters() == 3);

    root->eval();  // Module::train
    REQUIRE_FALSE(deepest->is_training());
    root->train();
    REQUIRE(deepest->is_training());

    w.set_grad(Tensor({1, 1}));
    root->zero_grad();
    REQUIRE_FALSE(w.grad().defined());

    // A cycle is refused: Module::contains walks the whole chain.
    CHECK_THAT(message_of<ValueError>([&] { deepest->register_module("loop", root); }), Contains("cycle"));

    // state_dict and load_state_dict.
    NamedTensors sd = root->state_dict();
    sd[1].second = Tensor({5, 6});
    root->load_state_dict(sd);
    REQUIRE(w.data()(1) == 6);

    root.reset();  // ~Module on a chain of 100,000
}

// =============================================================================================
// bug 6: concurrent saves, failed saves, crashed saves
// =============================================================================================

TEST_CASE("ckpt bug 6: concurrent saves to one path never mix two models", "[ckpt][serialize]") {
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

TEST_CASE("ckpt bug 6: a save that fails while writing removes its temporary file", "[ckpt][serialize]") {
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
          "[ckpt][serialize]") {
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

TEST_CASE("ckpt checksum: a flipped byte in tensor data is refused", "[ckpt][serialize][checksum]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    Single source;
    source.w.data()(0) = 3;
    source.save(path);
    const std::string bytes = read_bytes(path);
    Single m;
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

// =============================================================================================
// clip_grad_norm_(error_if_nonfinite)
// =============================================================================================

// Reference: torch.nn.utils.clip_grad_norm_ in torch 1.13 (Debian python3-torch), run by hand:
//   a.grad = [1, 2, nan], b.grad = [3, 4], max_norm 1  -> norm nan, a.grad [nan, nan, nan], b.grad [nan, nan]
//   a.grad = [1, 2, inf], b.grad = [3, 4], max_norm 1  -> norm inf, a.grad [0, 0, nan],     b.grad [0, 0]
//   error_if_nonfinite=True on either                  -> RuntimeError, gradients unchanged
TEST_CASE("ckpt clip_grad_norm_: error_if_nonfinite throws on a NaN or inf norm - otherwise scales as PyTorch",
          "[ckpt][optim][clip]") {
    const real nan = std::numeric_limits<real>::quiet_NaN(), inf = std::numeric_limits<real>::infinity();
    Tensor a = zeros({3}, true), b = zeros({2}, true);
    const std::vector<Tensor> params{a, b};
    for (real bad : {nan, inf, -inf}) {
        INFO("bad gradient entry " << bad);
        a.set_grad(Tensor({1, 2, bad}));
        b.set_grad(Tensor({3, 4}));
        const Array a_before = a.grad().data(), b_before = b.grad().data();
        CHECK_THAT(message_of<ValueError>([&] { optim::clip_grad_norm_(params, 1.0, 2.0, true); }),
                   Contains("clip_grad_norm_") && Contains("error_if_nonfinite"));
        REQUIRE(bits_equal(a.grad().data(), a_before));
        REQUIRE(bits_equal(b.grad().data(), b_before));
        CHECK_THROWS_AS(optim::clip_grad_norm_(params, 1.0, std::numeric_limits<double>::infinity(), true),
                        ValueError);

        const double norm = optim::clip_grad_norm_(params, 1.0);  // error_if_nonfinite = false
        const Array& ga = a.grad().data();
        const Array& gb = b.grad().data();
        if (std::isnan(bad)) {
            REQUIRE(std::isnan(norm));
            for (real v : ga) REQUIRE(std::isnan(v));
            for (real v : gb) REQUIRE(std::isnan(v));
        } else {
            REQUIRE(norm == std::numeric_limits<double>::infinity());
            REQUIRE(ga(0) == 0);
            REQUIRE(ga(1) == 0);
            REQUIRE(std::isnan(ga(2)));
            REQUIRE(gb(0) == 0);
            REQUIRE(gb(1) == 0);
        }
    }
    // A finite norm is unaffected by the flag.
    a.set_grad(Tensor({3, 0, 0}));
    b.set_grad(Tensor({0, 4}));
    REQUIRE(optim::clip_grad_norm_(params, 1.0, 2.0, true) == Approx(5.0));
    REQUIRE(a.grad().data()(0) == Approx(3.0 / (5.0 + 1e-6)));
}
