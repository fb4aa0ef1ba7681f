// tests/test_nn.cpp — value tests for xgrad::nn (float32 build).
//
// Covers: Module (registration, dotted names, counting, modes, zero_grad, bad names, cycles,
// tied parameters); state_dict / load_state_dict; safetensors files (round trip, byte
// layout, truncated and corrupted files, atomic writes); Embedding (init, lookup, row-scatter
// backward, padding, bad IDs, sparse gradients, the one-hot oracle, statistics); Linear;
// the losses (cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits); GELU and
// the activation modules; Sequential; and hostile inputs (tag [hostile]): NaN and ±inf,
// empty batches, wrong shapes, bad IDs and targets, corrupted files.
//
// Expected numbers are computed by hand in double (std::exp, std::log) or come from a second,
// independent path: one_hot(ids, V) @ E for Embedding, nll_loss(log_softmax(x)) for the fused
// cross_entropy. Finite-difference checks are in test_gradcheck_nn.cpp (double build).
//
// Legend: B batch, T time, V vocabulary, d width, C classes, N rows.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
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
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xview.hpp>

#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::message_of;
using xgrad::testing::TempDir;
using xgrad::testing::read_bytes;
using xgrad::testing::write_bytes;
using xgrad::testing::require_values;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace F = xgrad::nn::functional;

namespace {

constexpr real kInf = std::numeric_limits<real>::infinity();
constexpr real kNaN = std::numeric_limits<real>::quiet_NaN();

// A safetensors file from its parts: the 8-byte little-endian length (the header's padded size
// unless `declared` overrides it), the header padded with spaces to a multiple of 8, the data.
std::string st_file(std::string header, const std::string& data, std::optional<std::uint64_t> declared = {}) {
    header.append((8 - header.size() % 8) % 8, ' ');
    const std::uint64_t n = declared.value_or(header.size());
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);  // x86-64 and arm64 are little-endian
    return out + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
    std::string s(v.size() * 4, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
}

// ---- model snapshots: "the model is unchanged" compares every bit of every parameter ---------
using Snapshot = std::vector<std::pair<std::string, Array>>;

Snapshot snapshot(const nn::Module& m) {
    Snapshot s;
    for (const auto& [name, t] : m.named_parameters()) s.emplace_back(name, t.data());
    return s;
}

void require_unchanged(const nn::Module& m, const Snapshot& before) {
    const NamedTensors now = m.named_parameters();
    REQUIRE(now.size() == before.size());
    for (std::size_t i = 0; i < now.size(); ++i) {
        INFO("parameter " << now[i].first);
        REQUIRE(now[i].first == before[i].first);
        REQUIRE(now[i].second.shape() == Shape(before[i].second.shape().begin(), before[i].second.shape().end()));
        REQUIRE(std::memcmp(now[i].second.data().data(), before[i].second.data(),
                            before[i].second.size() * sizeof(real)) == 0);
    }
}

bool bits_equal(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data().data(), b.data().data(), a.numel() * sizeof(real)) == 0;
}

// ---- small models ------------------------------------------------------------------------------
// emb.weight (5, 3), fc.weight (2, 3), fc.bias (2): 15 + 6 + 2 = 23 parameters.
struct TinyNet : nn::Module {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Linear> fc;
    TinyNet() {
        emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
        fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    }
    Tensor forward(const IndexTensor& ids) const { return fc->forward(emb->forward(ids)); }
};

// One (2, 2) parameter "w" = [[1, 2], [3, 4]], the target of the hand-made corrupted files.
struct Single : nn::Module {
    Tensor w;
    Single() { w = register_parameter("w", Tensor({{1, 2}, {3, 4}})); }
};

// The valid file for Single: w = [[9, 8], [7, 6]].
const std::string kValidHeader = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
const std::string kValidData = f32_bytes({9, 8, 7, 6});

// Σ y ⊙ G: a scalar loss whose gradient with respect to y is exactly G.
Tensor weighted_sum(const Tensor& y, const Tensor& G) { return sum(mul(y, G)); }

// A (..., d) tensor with distinct values 1, 2, 3, ...: an upstream gradient whose rows are
// easy to add up by hand.
Tensor counting(const Shape& shape) {
    Array a(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(i + 1);
    return from_array(std::move(a));
}

double log_sum_exp(const std::vector<double>& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double s = 0;
    for (double v : x) s += std::exp(v - m);
    return m + std::log(s);
}

}  // namespace

// =============================================================================================
// Module
// =============================================================================================

TEST_CASE("named_parameters: dotted names in registration order", "[nn][module]") {
    TinyNet net;
    const NamedTensors named = net.named_parameters();
    REQUIRE(named.size() == 3);
    REQUIRE(named[0].first == "emb.weight");
    REQUIRE(named[1].first == "fc.weight");
    REQUIRE(named[2].first == "fc.bias");
    // The handles are the modules' own tensors, not copies.
    REQUIRE(named[0].second.impl() == net.emb->weight.impl());
    REQUIRE(named[2].second.impl() == net.fc->bias.impl());
    REQUIRE(net.parameters().size() == 3);
    for (const auto& p : net.parameters()) REQUIRE(p.requires_grad());
    REQUIRE(net.num_parameters() == 5 * 3 + 2 * 3 + 2);

    // Two levels deep, with a parameter registered directly on the outer module.
    struct Outer : nn::Module {
        Outer() {
            register_parameter("scale", ones({1}));
            register_module("encoder", std::make_shared<TinyNet>());
            register_parameter("shift", zeros({4}), /*requires_grad=*/false);
        }
    } outer;
    std::vector<std::string> names;
    for (const auto& [n, _] : outer.named_parameters()) names.push_back(n);
    // Own parameters first, then the children's, each in registration order.
    REQUIRE(names == std::vector<std::string>{"scale", "shift", "encoder.emb.weight", "encoder.fc.weight",
                                              "encoder.fc.bias"});
    REQUIRE(outer.num_parameters() == 1 + 4 + 23);
    REQUIRE_FALSE(outer.named_parameters()[1].second.requires_grad());
    REQUIRE(outer.named_children().size() == 1);
    REQUIRE(outer.named_children()[0].first == "encoder");
}

TEST_CASE("a submodule that was never registered is caught by counting parameters", "[nn][module]") {
    // The pattern: compute the expected count by hand and compare with num_parameters().
    // fc1: 4·8 + 8 = 40; fc2: 8·2 + 2 = 18; total 58.
    struct Careful : nn::Module {
        std::shared_ptr<nn::Linear> fc1, fc2;
        Careful() {
            fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
            fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
        }
    };
    struct Forgetful : nn::Module {
        std::shared_ptr<nn::Linear> fc1, fc2;
        Forgetful() {
            fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
            fc2 = std::make_shared<nn::Linear>(8, 2);  // the bug: stored, never registered
        }
    };
    const std::size_t expected = (4 * 8 + 8) + (8 * 2 + 2);
    REQUIRE(Careful().num_parameters() == expected);
    Forgetful broken;
    REQUIRE(broken.num_parameters() == 40);  // fc2's 18 parameters are invisible...
    REQUIRE(broken.num_parameters() != expected);
    // ...to the optimizer, to zero_grad and to save() as well.
    for (const auto& [name, _] : broken.state_dict()) REQUIRE(name.rfind("fc1.", 0) == 0);
}

TEST_CASE("train() and eval() reach every descendant", "[nn][module]") {
    auto inner = std::make_shared<nn::Sequential>();
    auto fc = std::make_shared<nn::Linear>(2, 2);
    inner->push_back("fc", fc);
    struct Net : nn::Module {} net;
    net.register_module("inner", inner);
    REQUIRE(net.is_training());
    REQUIRE(fc->is_training());
    net.eval();
    REQUIRE_FALSE(net.is_training());
    REQUIRE_FALSE(inner->is_training());
    REQUIRE_FALSE(fc->is_training());
    net.train();
    REQUIRE(net.is_training());
    REQUIRE(inner->is_training());
    REQUIRE(fc->is_training());
    net.train(false);
    REQUIRE_FALSE(fc->is_training());
}

TEST_CASE("zero_grad(true) drops gradients - zero_grad(false) fills them with zeros", "[nn][module]") {
    nn::Linear fc(3, 2);
    Tensor x = ones({4, 3});
    fc.forward(x).sum().backward();
    // dL/db = Σ_rows 1 = 4 for each output; dL/dW[j, i] = Σ_rows x = 4.
    require_values(fc.bias.grad(), {4, 4});
    require_values(fc.weight.grad(), {{4, 4, 4}, {4, 4, 4}});

    fc.zero_grad(/*set_to_none=*/false);
    REQUIRE(fc.weight.grad().defined());
    require_values(fc.weight.grad(), {{0, 0, 0}, {0, 0, 0}});
    require_values(fc.bias.grad(), {0, 0});

    fc.forward(x).sum().backward();
    require_values(fc.bias.grad(), {4, 4});  // accumulated onto the zeros
    fc.zero_grad();  // set_to_none = true, PyTorch's default
    REQUIRE_FALSE(fc.weight.has_grad());
    REQUIRE_FALSE(fc.bias.has_grad());
    fc.zero_grad(false);  // no gradient to fill: stays undefined
    REQUIRE_FALSE(fc.weight.has_grad());

    // A sparse gradient cannot be "zero-filled" in place; both modes drop it.
    nn::Embedding emb(4, 2, nn::EmbeddingOptions().set_sparse(true));
    emb.forward(IndexTensor{1, 2}).sum().backward();
    REQUIRE(emb.weight.sparse_grad() != nullptr);
    emb.zero_grad(false);
    REQUIRE_FALSE(emb.weight.has_grad());
}

TEST_CASE("register_parameter and register_module refuse bad names", "[nn][module]") {
    struct M : nn::Module {} m;
    m.register_parameter("w", zeros({2}));
    m.register_module("sub", std::make_shared<nn::Linear>(1, 1));

    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("a.b", zeros({1})); }),
               Contains("register_parameter") && Contains("'a.b'") && Contains("'.'"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("", zeros({1})); }),
               Contains("non-empty"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("w", zeros({1})); }),
               Contains("'w' is already registered"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("sub", zeros({1})); }),
               Contains("'sub' is already a submodule"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("u", Tensor()); }),
               Contains("undefined"));
    Tensor leaf({1, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { m.register_parameter("v", leaf * 2); }),
               Contains("leaf"));

    CHECK_THAT(message_of<ValueError>([&] { m.register_module("x.y", std::make_shared<nn::Tanh>()); }),
               Contains("register_module") && Contains("'x.y'"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("sub", std::make_shared<nn::Tanh>()); }),
               Contains("'sub' is already registered"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("w", std::make_shared<nn::Tanh>()); }),
               Contains("'w' is already a parameter"));
    CHECK_THAT(message_of<ValueError>([&] { m.register_module("n", std::shared_ptr<nn::Tanh>()); }),
               Contains("null"));
    // Nothing was added by the failed calls.
    REQUIRE(m.named_parameters().size() == 3);  // w, sub.weight, sub.bias
    REQUIRE(m.named_children().size() == 1);
}

TEST_CASE("hostile: a module tree with a cycle is refused - not walked forever", "[nn][module][hostile]") {
    // Walking a cycle in named_parameters() or train() would recurse until the stack overflows.
    auto a = std::make_shared<nn::Sequential>();
    auto b = std::make_shared<nn::Sequential>();
    a->push_back("b", b);
    CHECK_THAT(message_of<ValueError>([&] { b->push_back("a", a); }),
               Contains("register_module") && Contains("cycle"));
    CHECK_THAT(message_of<ValueError>([&] { a->push_back("self", a); }), Contains("cycle"));
    REQUIRE(a->size() == 1);
    REQUIRE(b->size() == 0);
    REQUIRE(a->num_parameters() == 0);
    a->eval();  // terminates
    REQUIRE_FALSE(b->is_training());
}

TEST_CASE("a parameter shared by two modules (weight tying) is listed once", "[nn][module]") {
    // As PyTorch's named_parameters(): the optimizer must update a shared tensor once per
    // step, num_parameters() counts it once, and a checkpoint stores it once. The first name
    // in traversal order (own parameters, then children) wins.
    struct Tied : nn::Module {
        std::shared_ptr<nn::Embedding> emb;
        Tied() {
            emb = register_module("emb", std::make_shared<nn::Embedding>(7, 4));
            register_parameter("bias", zeros({7}));
            register_parameter("decoder_weight", emb->weight);  // the output layer reuses E
        }
        // logits (N, V) = E[ids] Eᵀ + bias
        Tensor forward(const IndexTensor& ids) const {
            return F::linear(emb->forward(ids), named_parameters()[1].second, named_parameters()[0].second);
        }
    } tied;
    std::vector<std::string> names;
    for (const auto& [n, _] : tied.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"bias", "decoder_weight"});
    REQUIRE(tied.num_parameters() == 7 + 7 * 4);  // not 7 + 2·28
    REQUIRE(tied.named_parameters()[1].second.impl() == tied.emb->weight.impl());
    // Both uses contribute to the one gradient.
    tied.forward(IndexTensor{2}).sum().backward();
    REQUIRE(tied.emb->weight.grad().defined());

    // Sharing a whole submodule under two names also counts it once.
    struct Twice : nn::Module {
        Twice() {
            auto fc = std::make_shared<nn::Linear>(3, 3);
            register_module("a", fc);
            register_module("b", fc);
        }
    } twice;
    REQUIRE(twice.num_parameters() == 12);
    REQUIRE(twice.named_parameters().size() == 2);
    REQUIRE(twice.named_parameters()[0].first == "a.weight");

    // The checkpoint round trip works with the deduplicated names.
    TempDir dir;
    tied.save(dir.file("tied.safetensors"));
    Tied other;
    other.load(dir.file("tied.safetensors"));
    REQUIRE(bits_equal(other.emb->weight, tied.emb->weight));
}

// =============================================================================================
// state_dict / load_state_dict
// =============================================================================================

TEST_CASE("state_dict shares handles - load_state_dict copies values", "[nn][state_dict]") {
    manual_seed(1);
    TinyNet a;
    manual_seed(2);
    TinyNet b;
    REQUIRE_FALSE(bits_equal(a.fc->weight, b.fc->weight));
    NamedTensors sd = a.state_dict();
    REQUIRE(sd.size() == 3);
    REQUIRE(sd[1].second.impl() == a.fc->weight.impl());

    b.load_state_dict(sd);
    for (std::size_t i = 0; i < 3; ++i) REQUIRE(bits_equal(a.state_dict()[i].second, b.state_dict()[i].second));
    // A copy, not an alias: changing a afterwards leaves b alone.
    a.fc->weight.at({0, 0}) = 123;
    REQUIRE(b.fc->weight.at({0, 0}) != 123);
    // The order of the entries does not matter, only the names.
    NamedTensors reversed(sd.rbegin(), sd.rend());
    b.load_state_dict(reversed);
    REQUIRE(b.fc->weight.at({0, 0}) == 123);
}

TEST_CASE("load_state_dict: missing - unexpected or mis-shaped entries throw and change nothing",
          "[nn][state_dict]") {
    manual_seed(3);
    TinyNet net;
    const Snapshot before = snapshot(net);
    manual_seed(4);
    TinyNet other;
    const NamedTensors good = other.state_dict();

    SECTION("missing") {
        NamedTensors sd(good.begin(), good.begin() + 2);  // no fc.bias
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("load_state_dict") && Contains("missing") && Contains("'fc.bias'"));
    }
    SECTION("unexpected") {
        NamedTensors sd = good;
        sd.emplace_back("fc.extra", zeros({2}));
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("unexpected") && Contains("'fc.extra'"));
    }
    SECTION("wrong shape") {
        NamedTensors sd = good;
        sd[1].second = zeros({3, 2});  // fc.weight is (2, 3)
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("'fc.weight'") && Contains("(2, 3)") && Contains("(3, 2)"));
    }
    SECTION("wrong shape in the last entry, after valid ones") {
        NamedTensors sd = good;
        sd[2].second = zeros({3});
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }), Contains("'fc.bias'"));
    }
    SECTION("undefined tensor") {
        NamedTensors sd = good;
        sd[0].second = Tensor();
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("'emb.weight'") && Contains("undefined"));
    }
    SECTION("duplicate entry") {
        NamedTensors sd = good;
        sd.push_back(good[0]);
        CHECK_THAT(message_of<ValueError>([&] { net.load_state_dict(sd); }),
                   Contains("duplicate") && Contains("'emb.weight'"));
    }
    require_unchanged(net, before);
}

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
        for (std::size_t j = 0; j < pa[i].second.numel(); ++j)
            REQUIRE(pa[i].second.data().data()[j] == pb[i].second.data().data()[j]);
    }
    // Values that a text format would mangle survive bit for bit: -0, the smallest
    // subnormal, the largest float, ±inf and a NaN.
    a.emb->weight.at({0, 0}) = -0.0f;
    a.emb->weight.at({0, 1}) = std::numeric_limits<real>::denorm_min();
    a.emb->weight.at({0, 2}) = std::numeric_limits<real>::max();
    a.emb->weight.at({1, 0}) = kInf;
    a.emb->weight.at({1, 1}) = -kInf;
    a.emb->weight.at({1, 2}) = kNaN;
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
    // The caller's metadata, and the CRC-32 of the data section that xgrad adds (recomputed
    // here bit by bit: reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF).
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 8 + n; i < bytes.size(); ++i) {
        crc ^= static_cast<unsigned char>(bytes[i]);
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    crc ^= 0xFFFFFFFFu;
    REQUIRE(h.at("__metadata__") ==
            nlohmann::json{{"format", "pt"}, {"xgrad.data_crc32", fmt::format("{:08x}", crc)}});
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

TEST_CASE("save_safetensors refuses bad names and undefined tensors", "[nn][serialize]") {
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

TEST_CASE("a hand-made file loads - F64 data is converted", "[nn][serialize]") {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    Single m;
    write_bytes(path, st_file(kValidHeader, kValidData));
    m.load(path);
    require_values(m.w, {{9, 8}, {7, 6}}, 0);

    // F64 (e.g. written by the double build) into the float model.
    std::string d64(32, '\0');
    const double v[] = {0.5, -1.25, 3, 1e-3};
    std::memcpy(d64.data(), v, 32);
    write_bytes(path, st_file(R"({"__metadata__":{"k":"v"},"w":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]}})", d64));
    m.load(path);
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
    // One byte too many is not a valid file either (the data must end where the offsets say).
    write_bytes(bad, bytes + "x");
    CHECK_THAT(message_of<ValueError>([&] { net.load(bad); }), Contains("1 trailing byte"));
    require_unchanged(net, before);
}

TEST_CASE("hostile: corrupted headers throw a ValueError naming the problem", "[nn][serialize][hostile]") {
    TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    Single m;
    const Snapshot before = snapshot(m);
    auto expect_error = [&](const std::string& file_bytes, const std::string& needle) {
        write_bytes(path, file_bytes);
        const std::string msg = message_of<ValueError>([&] { m.load(path); });
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
        CHECK_THAT(message_of<ValueError>([&] { m.load(path); }), Contains("missing parameter 'w'"));
        write_bytes(path, st_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", D));
        CHECK_THAT(message_of<ValueError>([&] { m.load(path); }), Contains("'w' has shape (2, 2) in the model but (4)"));
        require_unchanged(m, before);
    }
}

TEST_CASE("hostile: a missing file - a directory or a device throws std::runtime_error", "[nn][serialize][hostile]") {
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

// =============================================================================================
// Embedding
// =============================================================================================

TEST_CASE("Embedding weight is standard normal N(0 1)", "[nn][embedding]") {
    manual_seed(123);
    nn::Embedding emb(1000, 100);  // 100k values
    REQUIRE(emb.weight.shape() == Shape{1000, 100});
    REQUIRE(emb.num_parameters() == 100000);
    auto mean_std = [](const Array& a) {
        double s = 0, s2 = 0;
        for (real v : a) s += v;
        const double mean = s / double(a.size());
        for (real v : a) s2 += (v - mean) * (v - mean);
        return std::pair<double, double>{mean, std::sqrt(s2 / double(a.size()))};
    };
    const auto [mean, sd] = mean_std(emb.weight.data());
    // Standard errors for 100k samples: 0.003 for the mean, 0.002 for the std.
    REQUIRE(std::abs(mean) < 0.02);
    REQUIRE(std::abs(sd - 1) < 0.05);
    // U(-1, 1) has std 1/√3 ≈ 0.577: the test above would catch that mistake.
    Tensor u = rand({1000, 100});
    const double ustd = mean_std(Array(2 * u.data() - 1)).second;
    REQUIRE(std::abs(ustd - 1) > 0.4);
    // Tails: N(0, 1) exceeds |3| with probability 0.0027, so ~270 of 100k; U(-1, 1) never.
    std::size_t beyond3 = 0;
    for (real v : emb.weight.data()) beyond3 += std::abs(v) > 3;
    REQUIRE(beyond3 > 150);
    REQUIRE(beyond3 < 400);

    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(0, 3); }), Contains("Embedding") && Contains("(0, 3)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(3, -1); }), Contains("(3, -1)"));
    // V·d·4 bytes beyond 2^64 would wrap around to a tiny allocation, and lookups would then
    // read outside it.
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(std::int64_t(1) << 32, std::int64_t(1) << 32); }),
               Contains("Embedding: a (4294967296, 4294967296) table is too large"));
}

TEST_CASE("Embedding forward: ids (BxT) give (BxTxd) - each row the table's row", "[nn][embedding]") {
    nn::Embedding emb(6, 2);
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t j = 0; j < 2; ++j) emb.weight.at({r, j}) = static_cast<real>(10 * r + j);
    Tensor y = emb.forward(IndexTensor{{1, 3, 5}, {0, 3, 3}});
    require_values(y, {{{10, 11}, {30, 31}, {50, 51}}, {{0, 1}, {30, 31}, {30, 31}}}, 0);
    // Any shape of IDs: (N,), (B, T, U), and a 0-d scalar ID.
    require_values(emb.forward(IndexTensor{4, 2}), {{40, 41}, {20, 21}}, 0);
    REQUIRE(emb.forward(IndexTensor{{{1}, {2}}, {{3}, {4}}}).shape() == Shape{2, 2, 1, 2});
    require_values(emb.forward(IndexTensor(IndexArray(std::int64_t(5)))), {50, 51}, 0);
    REQUIRE(emb.forward(IndexTensor{1}).requires_grad());
    REQUIRE(emb.forward(IndexTensor{1}).grad_fn()->name == "embedding");
}

TEST_CASE("Embedding backward touches only the looked-up rows - duplicates sum", "[nn][embedding]") {
    nn::Embedding emb(6, 2);
    IndexTensor ids{{1, 3}, {3, 0}};
    Tensor G = counting({2, 2, 2});  // [[[1,2],[3,4]],[[5,6],[7,8]]]
    weighted_sum(emb.forward(ids), G).backward();
    // row 1 ← G[0,0]; row 3 ← G[0,1] + G[1,0]; row 0 ← G[1,1]; rows 2, 4, 5: exactly 0.
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {0, 0}, {3 + 5, 4 + 6}, {0, 0}, {0, 0}}, 0);
    // A second backward accumulates with +=.
    weighted_sum(emb.forward(IndexTensor{2}), Tensor({{100, 200}})).backward();
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {100, 200}, {8, 10}, {0, 0}, {0, 0}}, 0);
}

TEST_CASE("Embedding padding_idx: a zero row that gets no gradient", "[nn][embedding]") {
    nn::Embedding emb(6, 2, nn::EmbeddingOptions().set_padding_idx(3));
    REQUIRE(emb.options().padding_idx == 3);
    require_values(Tensor(Array(xt::view(emb.weight.data(), 3))), {0, 0}, 0);
    REQUIRE(emb.weight.at({2, 0}) != 0);  // the other rows are random
    Tensor y = emb.forward(IndexTensor{{1, 3}, {3, 0}});
    require_values(Tensor(Array(xt::view(y.data(), 0, 1))), {0, 0}, 0);  // the padding row as is
    weighted_sum(y, counting({2, 2, 2})).backward();
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}, 0);

    // Negative padding_idx counts from the end: -1 is row V - 1.
    nn::Embedding last(6, 2, nn::EmbeddingOptions().set_padding_idx(-1));
    REQUIRE(last.options().padding_idx == 5);
    require_values(Tensor(Array(xt::view(last.weight.data(), 5))), {0, 0}, 0);
    weighted_sum(last.forward(IndexTensor{5, 4}), Tensor({{1, 1}, {2, 2}})).backward();
    require_values(Tensor(Array(xt::view(last.weight.grad().data(), 5))), {0, 0}, 0);
    require_values(Tensor(Array(xt::view(last.weight.grad().data(), 4))), {2, 2}, 0);
    nn::Embedding first(6, 2, nn::EmbeddingOptions().set_padding_idx(-6));
    REQUIRE(first.options().padding_idx == 0);

    // Out of range: [-V, V).
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(6, 2, nn::EmbeddingOptions().set_padding_idx(6)); }),
               Contains("padding_idx 6 out of range [-6, 6)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(6, 2, nn::EmbeddingOptions().set_padding_idx(-7)); }),
               Contains("padding_idx -7 out of range [-6, 6)"));
    Tensor w = randn({4, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { F::embedding(w, IndexTensor{0}, 4); }),
               Contains("embedding") && Contains("padding_idx 4 out of range [-4, 4)"));
}

TEST_CASE("hostile: Embedding: IDs outside 0..V-1 throw IndexError at forward time", "[nn][embedding][hostile]") {
    nn::Embedding emb(5, 3);
    const Snapshot before = snapshot(emb);
    const std::string msg = message_of<IndexError>([&] { emb.forward(IndexTensor{{0, 1, 2}, {3, 4, 7}}); });
    // The position, the value and V, in the project's format.
    REQUIRE(msg == "embedding: index 7 at position (1, 2) out of range [0, 5)");
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{{0, -1}}); }),
               Contains("index -1 at position (0, 1) out of range [0, 5)"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{5}); }),
               Contains("index 5 at position (0) out of range [0, 5)"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{std::numeric_limits<std::int64_t>::max()}); }),
               Contains("index 9223372036854775807"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{std::numeric_limits<std::int64_t>::min()}); }),
               Contains("index -9223372036854775808"));
    require_unchanged(emb, before);
    REQUIRE_FALSE(emb.weight.has_grad());
    // A weight that is not (V, d).
    CHECK_THAT(message_of<ValueError>([] { F::embedding(zeros({4}), IndexTensor{0}); }),
               Contains("weight must be (V, d)"));
}

TEST_CASE("hostile: Embedding: an empty batch of IDs", "[nn][embedding][hostile]") {
    nn::Embedding emb(5, 3);
    Tensor y = emb.forward(IndexTensor(IndexArray::from_shape({0})));
    REQUIRE(y.shape() == Shape{0, 3});
    y.sum().backward();
    REQUIRE(emb.last_backward_stats().tokens == 0);
    REQUIRE(emb.last_backward_stats().rows_touched == 0);
    require_values(emb.weight.grad(), zeros({5, 3}), 0);

    nn::Embedding sparse(5, 3, nn::EmbeddingOptions().set_sparse(true));
    Tensor ys = sparse.forward(IndexTensor(IndexArray::from_shape({2, 0})));
    REQUIRE(ys.shape() == Shape{2, 0, 3});
    ys.sum().backward();
    REQUIRE(sparse.weight.sparse_grad() != nullptr);
    REQUIRE(sparse.weight.sparse_grad()->indices.empty());
    require_values(from_array(sparse.weight.sparse_grad()->to_dense()), zeros({5, 3}), 0);
}

TEST_CASE("Embedding sparse=true: a coalesced gradient equal to the dense one", "[nn][embedding][sparse]") {
    manual_seed(7);
    nn::Embedding dense(6, 2);
    nn::Embedding sparse(6, 2, nn::EmbeddingOptions().set_sparse(true));
    sparse.weight.data() = dense.weight.data();
    IndexTensor ids{{3, 1}, {3, 0}};
    Tensor G = counting({2, 2, 2});
    weighted_sum(dense.forward(ids), G).backward();
    weighted_sum(sparse.forward(ids), G).backward();

    const SparseGrad* sg = sparse.weight.sparse_grad();
    REQUIRE(sg != nullptr);
    REQUIRE(sg->dense_shape == Shape{6, 2});
    REQUIRE(sg->indices == std::vector<std::int64_t>{0, 1, 3});  // sorted, unique: (k,)
    require_values(from_array(sg->values), {{7, 8}, {3, 4}, {1 + 5, 2 + 6}}, 0);  // (k, d)
    REQUIRE(sg->nbytes() == 3 * 8 + 3 * 2 * sizeof(real));
    require_values(from_array(sg->to_dense()), dense.weight.grad(), 0);
    CHECK_THAT(message_of<ValueError>([&] { sparse.weight.grad(); }), Contains("row-sparse"));

    // A second backward accumulates and re-coalesces: row 3 appears in both batches.
    IndexTensor ids2{5, 3, 5};
    Tensor G2({{10, 20}, {30, 40}, {50, 60}});
    weighted_sum(dense.forward(ids2), G2).backward();
    weighted_sum(sparse.forward(ids2), G2).backward();
    REQUIRE(sg->indices == std::vector<std::int64_t>{0, 1, 3, 5});
    require_values(from_array(sg->values), {{7, 8}, {3, 4}, {6 + 30, 8 + 40}, {60, 80}}, 0);
    require_values(from_array(sg->to_dense()), dense.weight.grad(), 0);

    // A dense gradient meeting the sparse one (the table used again, as by a tied output head,
    // nn/tying.hpp) sums into a dense gradient.
    Tensor w = sparse.weight;
    (w * 2).sum().backward();
    REQUIRE(sparse.weight.sparse_grad() == nullptr);
    require_values(sparse.weight.grad(), add(dense.weight.grad(), 2), 0);
    // sparse=true on a non-leaf weight that requires grad is refused at forward time.
    Tensor base = randn({4, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { F::embedding(base * 2, IndexTensor{0}, {}, true); }),
               Contains("sparse=true needs the weight to be a leaf"));
}

TEST_CASE("Embedding equals the one-hot oracle: one_hot(ids V) @ E - in output and gradient",
          "[nn][embedding][oracle]") {
    const std::size_t V = 7, d = 4;
    IndexTensor ids{{1, 6, 1}, {0, 3, 6}};  // (B, T) = (2, 3), with duplicates
    manual_seed(8);
    Tensor G = randn({2, 3, d});
    for (bool sparse : {false, true}) {
        INFO("sparse = " << sparse);
        Tensor E = randn({V, d}, true);
        Tensor E_ref = from_array(E.data(), true);  // same values, a separate leaf
        Tensor y = F::embedding(E, ids, {}, sparse);
        Tensor y_ref = matmul(one_hot(ids, V), E_ref);  // (B, T, V) @ (V, d) = (B, T, d)
        require_values(y, y_ref, 0);  // 1·e + Σ 0·e' is exact
        weighted_sum(y, G).backward();
        weighted_sum(y_ref, G).backward();
        const Array grad = sparse ? E.sparse_grad()->to_dense() : E.grad().data();
        require_values(from_array(grad), E_ref.grad(), 1e-6);
        // Rows 2, 4, 5 were never looked up: exactly zero in both paths.
        for (std::size_t r : {2, 4, 5})
            for (std::size_t j = 0; j < d; ++j) REQUIRE(grad(r, j) == 0);
    }
}

TEST_CASE("Embedding statistics of the last backward", "[nn][embedding][stats]") {
    // V = 5, d = 4, padding 0; ids [[1, 3, 3], [0, 2, 3]]: 6 tokens, one of them padding; the
    // other 5 hit rows {1, 2, 3}, so k = 3 and duplicates = 5 - 3 = 2.
    IndexTensor ids{{1, 3, 3}, {0, 2, 3}};
    nn::Embedding dense(5, 4, nn::EmbeddingOptions().set_padding_idx(0));
    dense.forward(ids).sum().backward();
    const auto& s = dense.last_backward_stats();
    REQUIRE(s.tokens == 6);
    REQUIRE(s.rows_touched == 3);
    REQUIRE(s.duplicates == 2);
    REQUIRE(s.bytes_written == 5 * 4 * sizeof(real));  // 5 row additions of d floats: 80 bytes

    nn::Embedding sparse(5, 4, nn::EmbeddingOptions().set_padding_idx(0).set_sparse(true));
    sparse.forward(ids).sum().backward();
    const auto& ss = sparse.last_backward_stats();
    REQUIRE(ss.tokens == 6);
    REQUIRE(ss.rows_touched == 3);
    REQUIRE(ss.duplicates == 2);
    REQUIRE(ss.bytes_written == 3 * (4 * sizeof(real) + 8));  // k rows + k int64 indices: 72 bytes
    // Every row of ones was summed: row 3 three times.
    require_values(from_array(sparse.weight.sparse_grad()->values), {{1, 1, 1, 1}, {1, 1, 1, 1}, {3, 3, 3, 3}}, 0);
}

// =============================================================================================
// Linear
// =============================================================================================

TEST_CASE("Linear forward y = x Wᵀ + b on hand numbers", "[nn][linear]") {
    nn::Linear fc(3, 2);
    REQUIRE(fc.in_features() == 3);
    REQUIRE(fc.out_features() == 2);
    fc.weight.data() = Tensor({{1, 2, 3}, {4, 5, 6}}).data();
    fc.bias.data() = Tensor({0.5, -1}).data();
    Tensor x({{1, 0, -1}, {2, 1, 0}});
    // [1 - 3 + 0.5, 4 - 6 - 1] and [2 + 2 + 0.5, 8 + 5 - 1]
    require_values(fc.forward(x), {{-1.5, -3}, {4.5, 12}}, 0);
    // A single vector (in,) → (out,).
    require_values(fc.forward(Tensor({1, 1, 1})), {6.5, 14}, 0);
    // (B, T, in) → (B, T, out): every row as above.
    Tensor x3({{{1, 0, -1}, {2, 1, 0}}, {{0, 0, 0}, {1, 1, 1}}});
    require_values(fc.forward(x3), {{{-1.5, -3}, {4.5, 12}}, {{0.5, -1}, {6.5, 14}}}, 0);

    // Backward: dX = G W, dW = Gᵀ X, db = Σ G.
    Tensor xg({{1, 0, -1}, {2, 1, 0}}, true);
    weighted_sum(fc.forward(xg), Tensor({{1, 0}, {0, 1}})).backward();
    require_values(xg.grad(), {{1, 2, 3}, {4, 5, 6}}, 0);
    require_values(fc.weight.grad(), {{1, 0, -1}, {2, 1, 0}}, 0);
    require_values(fc.bias.grad(), {1, 1}, 0);
}

TEST_CASE("Linear init is U(-1/√in 1/√in) - spread over the whole interval", "[nn][linear]") {
    manual_seed(9);
    nn::Linear fc(400, 300);
    const double k = 1 / std::sqrt(400.0);  // 0.05
    double s = 0, s2 = 0;
    real lo = 1, hi = -1;
    for (real v : fc.weight.data()) {
        s += v;
        s2 += double(v) * v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    const double n = 120000;
    REQUIRE(lo >= -k);
    REQUIRE(hi <= k);
    REQUIRE(lo < -0.99 * k);
    REQUIRE(hi > 0.99 * k);
    REQUIRE(std::abs(s / n) < 0.001);
    REQUIRE(std::sqrt(s2 / n) == Approx(k / std::sqrt(3.0)).epsilon(0.02));  // U(-k, k) has std k/√3
    for (real v : fc.bias.data()) REQUIRE(std::abs(v) <= k);
    REQUIRE(*std::min_element(fc.bias.data().begin(), fc.bias.data().end()) < -0.8 * k);
    REQUIRE(*std::max_element(fc.bias.data().begin(), fc.bias.data().end()) > 0.8 * k);
}

TEST_CASE("Linear without bias", "[nn][linear]") {
    nn::Linear fc(3, 2, /*bias=*/false);
    REQUIRE_FALSE(fc.bias.defined());
    REQUIRE(fc.named_parameters().size() == 1);
    REQUIRE(fc.num_parameters() == 6);
    fc.weight.data() = Tensor({{1, 2, 3}, {4, 5, 6}}).data();
    require_values(fc.forward(Tensor({{1, 0, -1}})), {{-2, -2}}, 0);
}

TEST_CASE("hostile: Linear: wrong input sizes - empty batches", "[nn][linear][hostile]") {
    nn::Linear fc(3, 2);
    CHECK_THAT(message_of<ValueError>([&] { fc.forward(ones({2, 4})); }),
               Contains("linear") && Contains("(2, 4)") && Contains("in_features = 3"));
    CHECK_THAT(message_of<ValueError>([&] { fc.forward(Tensor(1.0)); }), Contains("in_features = 3"));
    CHECK_THAT(message_of<ValueError>([&] { F::linear(ones({2, 3}), ones({3})); }),
               Contains("weight must be (out, in)"));
    CHECK_THAT(message_of<ValueError>([&] { F::linear(ones({2, 3}), ones({2, 3}), ones({3})); }),
               Contains("bias of shape (3) does not match (2,)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Linear(0, 2); }), Contains("Linear") && Contains("(0, 2)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Linear(std::int64_t(1) << 33, std::int64_t(1) << 31); }),
               Contains("Linear") && Contains("too large"));

    // An empty batch (0, in) → (0, out); its gradients are exact zeros, not uninitialised memory.
    Tensor x = zeros({0, 3}, true);
    Tensor y = fc.forward(x);
    REQUIRE(y.shape() == Shape{0, 2});
    y.sum().backward();
    REQUIRE(x.grad().shape() == Shape{0, 3});
    require_values(fc.weight.grad(), zeros({2, 3}), 0);
    require_values(fc.bias.grad(), zeros({2}), 0);
    REQUIRE(fc.forward(zeros({2, 0, 3})).shape() == Shape{2, 0, 2});

    // in = 0 (functional only): y is the bias, repeated; dW is (out, 0).
    Tensor w0 = zeros({2, 0}, true), b0({7, 8}, true);
    Tensor y0 = F::linear(zeros({3, 0}), w0, b0);
    require_values(y0, {{7, 8}, {7, 8}, {7, 8}}, 0);
    y0.sum().backward();
    require_values(b0.grad(), {3, 3}, 0);
}

// =============================================================================================
// cross_entropy
// =============================================================================================

TEST_CASE("cross_entropy on a hand-computed 2×3 example", "[nn][loss][cross_entropy]") {
    // loss_i = lse(x_i) - x_i[t_i],   lse(x) = log Σ_c e^(x_c)
    const std::vector<std::vector<double>> X{{1, 2, 3}, {1, -1, 0.5}};
    const std::vector<int> t{2, 0};
    const double l0 = log_sum_exp(X[0]) - X[0][2];
    const double l1 = log_sum_exp(X[1]) - X[1][0];
    REQUIRE(l0 == Approx(0.40760596444438).epsilon(1e-12));  // -log softmax([1,2,3])[2]

    Tensor logits({{1, 2, 3}, {1, -1, 0.5}}, true);
    IndexTensor targets{2, 0};
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.shape() == Shape{});
    REQUIRE(loss.item() == Approx((l0 + l1) / 2).epsilon(1e-6));

    // dL/dx = (softmax(x) - onehot(t)) / N
    loss.backward();
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t c = 0; c < 3; ++c) {
            const double p = std::exp(X[i][c] - log_sum_exp(X[i]));
            const double expected = (p - (int(c) == t[i] ? 1.0 : 0.0)) / 2;
            REQUIRE(logits.grad().at({i, c}) == Approx(expected).margin(1e-7));
        }

    // Reductions.
    REQUIRE(F::cross_entropy(logits, targets, {nn::Reduction::Sum}).item() == Approx(l0 + l1).epsilon(1e-6));
    Tensor none = F::cross_entropy(logits, targets, {nn::Reduction::None});
    REQUIRE(none.shape() == Shape{2});
    require_values(none, {real(l0), real(l1)}, 1e-6);
    // Reduction::None backward: row i is scaled by its own upstream gradient.
    logits.reset_grad();
    none.backward(Tensor({1, 0}));
    require_values(Tensor(Array(xt::view(logits.grad().data(), 1))), {0, 0, 0}, 0);
}

TEST_CASE("cross_entropy (BxTxC) with (BxT) equals the flattened (B·TxC)", "[nn][loss][cross_entropy]") {
    manual_seed(5);
    Tensor x3 = randn({2, 3, 4}, true);
    Tensor x2 = from_array(x3.detach().reshape({6, 4}).data(), true);
    IndexTensor t3{{0, 3, 1}, {2, 2, 0}};
    IndexTensor t2 = t3.reshape({6});
    Tensor l3 = F::cross_entropy(x3, t3), l2 = F::cross_entropy(x2, t2);
    REQUIRE(l3.item() == Approx(l2.item()).epsilon(1e-6));
    l3.backward();
    l2.backward();
    REQUIRE(x3.grad().shape() == Shape{2, 3, 4});
    require_values(x3.grad().reshape({6, 4}), x2.grad(), 1e-6);
    REQUIRE(F::cross_entropy(x3, t3, {nn::Reduction::None}).shape() == Shape{2, 3});
}

TEST_CASE("cross_entropy ignore_index: ignored rows count for nothing", "[nn][loss][cross_entropy]") {
    Tensor logits({{1, 2, 3}, {5, 0, 0}, {1, -1, 0.5}}, true);
    IndexTensor targets{2, -100, 0};
    const double l0 = log_sum_exp({1, 2, 3}) - 3, l2 = log_sum_exp({1, -1, 0.5}) - 1;
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.item() == Approx((l0 + l2) / 2).epsilon(1e-6));  // divided by 2 valid rows, not 3
    loss.backward();
    require_values(Tensor(Array(xt::view(logits.grad().data(), 1))), {0, 0, 0}, 0);
    REQUIRE(logits.grad().at({0, 2}) == Approx((std::exp(3 - log_sum_exp({1, 2, 3})) - 1) / 2).margin(1e-7));
    require_values(F::cross_entropy(logits, targets, {nn::Reduction::None}), {real(l0), 0, real(l2)}, 1e-6);
    REQUIRE(F::cross_entropy(logits, targets, {nn::Reduction::Sum}).item() == Approx(l0 + l2).epsilon(1e-6));

    // A custom ignore_index: -100 is now an ordinary (out-of-range) target.
    F::CrossEntropyOptions o;
    o.ignore_index = 1;
    REQUIRE(F::cross_entropy(logits, IndexTensor{2, 1, 0}, o).item() == Approx((l0 + l2) / 2).epsilon(1e-6));
    CHECK_THAT(message_of<IndexError>([&] { F::cross_entropy(logits, targets, o); }), Contains("target -100"));
}

TEST_CASE("hostile: cross_entropy with every target ignored: 0 - and a gradient of exact zeros",
          "[nn][loss][cross_entropy][hostile]") {
    Tensor logits({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor loss = F::cross_entropy(logits, IndexTensor{-100, -100});
    REQUIRE(loss.item() == 0);  // PyTorch gives nan (0/0); xgrad documents 0
    loss.backward();
    require_values(logits.grad(), zeros({2, 3}), 0);
    REQUIRE(F::cross_entropy(logits, IndexTensor{-100, -100}, {nn::Reduction::Sum}).item() == 0);
}

TEST_CASE("hostile: cross_entropy on an empty batch (0xC)", "[nn][loss][cross_entropy][hostile]") {
    Tensor logits = zeros({0, 5}, true);
    IndexTensor targets(IndexArray::from_shape({0}));
    Tensor loss = F::cross_entropy(logits, targets);
    REQUIRE(loss.item() == 0);
    loss.backward();
    REQUIRE(logits.grad().shape() == Shape{0, 5});
    REQUIRE(F::cross_entropy(logits, targets, {nn::Reduction::Sum}).item() == 0);
    REQUIRE(F::cross_entropy(logits, targets, {nn::Reduction::None}).shape() == Shape{0});
    REQUIRE(F::cross_entropy(zeros({2, 0, 5}), IndexTensor(IndexArray::from_shape({2, 0}))).item() == 0);
    // (N, 0): no classes at all.
    CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(zeros({0, 0}), targets); }), Contains("no classes"));
}

TEST_CASE("hostile: cross_entropy with extreme logits", "[nn][loss][cross_entropy][hostile]") {
    // 1e4 would overflow e^x in float and double; the max-subtracted form stays finite.
    Tensor big({{1e4, -1e4, 0}, {1e4, -1e4, 0}}, true);
    Tensor none = F::cross_entropy(big, IndexTensor{0, 1}, {nn::Reduction::None});
    require_values(none, {0, 2e4}, 1e-6);
    F::cross_entropy(big, IndexTensor{0, 1}).backward();
    // Row 0: p = (1, 0, 0) = onehot → 0. Row 1: p - onehot(1) = (1, -1, 0), / 2.
    require_values(big.grad(), {{0, 0, 0}, {0.5, -0.5, 0}}, 1e-7);

    // A -inf (masked) logit: p = 0 there, so its gradient is exactly 0 and the loss finite.
    Tensor masked({{-kInf, 1, 2}}, true);
    Tensor l = F::cross_entropy(masked, IndexTensor{2});
    REQUIRE(std::isfinite(l.item()));
    REQUIRE(l.item() == Approx(log_sum_exp({1, 2}) - 2).epsilon(1e-6));
    l.backward();
    REQUIRE(masked.grad().at({0, 0}) == 0);
    REQUIRE_FALSE(std::signbit(masked.grad().at({0, 0})));
    REQUIRE(std::isfinite(masked.grad().at({0, 1})));

    // Documented non-finite cases, as in PyTorch (none of them crashes):
    //   the target's own logit is -inf        → loss +inf
    //   label smoothing with a -inf logit     → loss +inf (ε/C · (-log 0))
    //   every logit -inf, or a +inf logit     → nan (inf - inf)
    Tensor t_masked({{-kInf, 1, 2}});
    REQUIRE(F::cross_entropy(t_masked, IndexTensor{0}).item() == kInf);
    F::CrossEntropyOptions smooth;
    smooth.label_smoothing = 0.1;
    REQUIRE(F::cross_entropy(t_masked, IndexTensor{2}, smooth).item() == kInf);
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{-kInf, -kInf}}), IndexTensor{0}).item()));
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{kInf, 0}}), IndexTensor{0}).item()));
}

TEST_CASE("hostile: cross_entropy with a NaN logit: NaN in that row only - no crash",
          "[nn][loss][cross_entropy][hostile]") {
    // NaN propagates (as in PyTorch): the row's loss and gradient are NaN, the other rows'
    // are unaffected under Reduction::None, and the mean is NaN.
    Tensor logits({{0, kNaN, 2}, {1, 2, 3}}, true);
    Tensor none = F::cross_entropy(logits, IndexTensor{0, 2}, {nn::Reduction::None});
    REQUIRE(std::isnan(none.at({0})));
    REQUIRE(none.at({1}) == Approx(log_sum_exp({1, 2, 3}) - 3).epsilon(1e-6));
    none.backward(Tensor({1, 1}));
    for (std::size_t c = 0; c < 3; ++c) {
        REQUIRE(std::isnan(logits.grad().at({0, c})));
        REQUIRE(std::isfinite(logits.grad().at({1, c})));
    }
    REQUIRE(std::isnan(F::cross_entropy(logits, IndexTensor{0, 2}).item()));
    REQUIRE(std::isnan(F::cross_entropy(Tensor({{kNaN, 1}}), IndexTensor{1}).item()));  // NaN first
    // An ignored row's NaN does not leak into the loss.
    REQUIRE(F::cross_entropy(logits, IndexTensor{-100, 2}).item() == Approx(log_sum_exp({1, 2, 3}) - 3).epsilon(1e-6));
}

TEST_CASE("cross_entropy label_smoothing against the formula", "[nn][loss][cross_entropy]") {
    // q_c = (1 - ε)[c = t] + ε/C,   loss_i = -Σ_c q_c log p_c
    const double eps = 0.1;
    const std::vector<std::vector<double>> X{{1, 2, 3}, {1, -1, 0.5}};
    const std::vector<std::size_t> t{2, 0};
    Tensor logits({{1, 2, 3}, {1, -1, 0.5}}, true);
    F::CrossEntropyOptions o;
    o.label_smoothing = eps;
    o.reduction = nn::Reduction::None;
    Tensor none = F::cross_entropy(logits, IndexTensor{2, 0}, o);
    double total = 0;
    for (std::size_t i = 0; i < 2; ++i) {
        double li = 0;
        for (std::size_t c = 0; c < 3; ++c) {
            const double q = (c == t[i] ? 1 - eps : 0) + eps / 3;
            li -= q * (X[i][c] - log_sum_exp(X[i]));
        }
        REQUIRE(none.at({i}) == Approx(li).epsilon(1e-6));
        total += li;
    }
    o.reduction = nn::Reduction::Mean;
    Tensor mean = F::cross_entropy(logits, IndexTensor{2, 0}, o);
    REQUIRE(mean.item() == Approx(total / 2).epsilon(1e-6));
    mean.backward();  // (p - q) / N
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t c = 0; c < 3; ++c) {
            const double q = (c == t[i] ? 1 - eps : 0) + eps / 3;
            REQUIRE(logits.grad().at({i, c}) == Approx((std::exp(X[i][c] - log_sum_exp(X[i])) - q) / 2).margin(1e-7));
        }
    // ε = 1: the target is uniform, loss = lse - mean(x).
    o.label_smoothing = 1;
    o.reduction = nn::Reduction::None;
    REQUIRE(F::cross_entropy(logits, IndexTensor{2, 0}, o).at({0}) == Approx(log_sum_exp(X[0]) - 2).epsilon(1e-6));

    for (double bad : {-0.1, 1.5, double(NAN)}) {
        o.label_smoothing = bad;
        CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(logits, IndexTensor{2, 0}, o); }),
                   Contains("label_smoothing") && Contains("outside [0, 1]"));
    }
}

TEST_CASE("fused cross_entropy equals the composed nll_loss(log_softmax(x))", "[nn][loss][cross_entropy]") {
    manual_seed(6);
    Tensor x = from_array(Array(5 * randn({8, 6}).data()), true);  // logits up to ~±15
    Tensor xc = from_array(x.data(), true);
    IndexTensor t{0, 5, 3, 3, -100, 1, 2, 4};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum}) {
        x.reset_grad();
        xc.reset_grad();
        Tensor fused = F::cross_entropy(x, t, {r});
        Tensor composed = F::nll_loss(log_softmax(xc, -1), t, {r});
        REQUIRE(fused.item() == Approx(composed.item()).epsilon(1e-5));
        fused.backward();
        composed.backward();
        require_values(x.grad(), xc.grad(), 1e-5);
    }
}

TEST_CASE("hostile: cross_entropy and nll_loss: bad targets and shapes", "[nn][loss][hostile]") {
    Tensor logits({{1, 2, 3}, {4, 5, 6}});
    for (auto fn : {&F::cross_entropy, &F::nll_loss}) {
        const std::string op = fn == &F::cross_entropy ? "cross_entropy" : "nll_loss";
        INFO(op);
        auto call = [&](const Tensor& x, const IndexTensor& t) { return fn(x, t, F::CrossEntropyOptions{}); };
        const std::string msg = message_of<IndexError>([&] { call(logits, IndexTensor{0, 3}); });
        REQUIRE(msg == op + ": target 3 at position (1) out of range [0, 3) (ignore_index is -100)");
        CHECK_THAT(message_of<IndexError>([&] { call(logits, IndexTensor{-1, 0}); }), Contains("target -1"));
        CHECK_THAT(message_of<IndexError>([&] { call(logits, IndexTensor{-101, 0}); }), Contains("target -101"));
        // Shapes: targets (N,) for (N, C), (B, T) for (B, T, C).
        CHECK_THAT(message_of<ValueError>([&] { call(logits, IndexTensor{0, 1, 2}); }),
                   Contains(op) && Contains("(2, 3)") && Contains("(3)"));
        CHECK_THAT(message_of<ValueError>([&] { call(logits, IndexTensor{{0}, {1}}); }), Contains("(2, 1)"));
        CHECK_THAT(message_of<ValueError>([&] { call(Tensor({1, 2, 3}), IndexTensor(IndexArray(std::int64_t(0)))); }),
                   Contains("do not match"));
        CHECK_THAT(message_of<ValueError>([&] { call(zeros({2, 3, 4}), IndexTensor{0, 1}); }), Contains("(2, 3, 4)"));
        CHECK_THAT(message_of<ValueError>([&] { call(Tensor(), IndexTensor{0}); }), Contains("undefined"));
    }
    // A Reduction cast from an arbitrary integer would otherwise act as Sum with a zero gradient.
    const auto bogus = static_cast<nn::Reduction>(42);
    Tensor x({{1, 2}}, true);
    F::CrossEntropyOptions o;
    o.reduction = bogus;
    CHECK_THAT(message_of<ValueError>([&] { F::cross_entropy(x, IndexTensor{0}, o); }),
               Contains("cross_entropy: unknown reduction 42"));
    CHECK_THAT(message_of<ValueError>([&] { F::nll_loss(x, IndexTensor{0}, o); }), Contains("unknown reduction"));
    CHECK_THAT(message_of<ValueError>([&] { F::mse_loss(x, x, bogus); }), Contains("mse_loss: unknown reduction"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(x, zeros({1, 2}), bogus); }),
               Contains("unknown reduction"));
}

// =============================================================================================
// nll_loss, mse_loss, binary_cross_entropy_with_logits
// =============================================================================================

TEST_CASE("nll_loss on hand numbers", "[nn][loss]") {
    Tensor lp({{-0.1, -2, -3}, {-1, -0.5, -4}}, true);
    Tensor loss = F::nll_loss(lp, IndexTensor{0, 1});
    REQUIRE(loss.item() == Approx((0.1 + 0.5) / 2).epsilon(1e-6));
    loss.backward();
    require_values(lp.grad(), {{-0.5, 0, 0}, {0, -0.5, 0}}, 0);
    require_values(F::nll_loss(lp, IndexTensor{2, -100}, {nn::Reduction::None}), {3, 0}, 1e-7);
    REQUIRE(F::nll_loss(lp, IndexTensor{2, 2}, {nn::Reduction::Sum}).item() == Approx(7).epsilon(1e-6));
    REQUIRE(F::nll_loss(lp, IndexTensor{-100, -100}).item() == 0);
    F::CrossEntropyOptions o;
    o.label_smoothing = 0.1;
    CHECK_THAT(message_of<ValueError>([&] { F::nll_loss(lp, IndexTensor{0, 1}, o); }),
               Contains("nll_loss") && Contains("label_smoothing"));
}

TEST_CASE("mse_loss on hand numbers", "[nn][loss]") {
    Tensor x({1, 2, 3}, true);
    Tensor y({1, 0, 5});
    Tensor loss = F::mse_loss(x, y);  // (0 + 4 + 4) / 3
    REQUIRE(loss.item() == Approx(8.0 / 3).epsilon(1e-6));
    loss.backward();  // 2 (x - y) / 3
    require_values(x.grad(), {0, 4.0 / 3, -4.0 / 3}, 1e-6);
    REQUIRE(F::mse_loss(x, y, nn::Reduction::Sum).item() == 8);
    require_values(F::mse_loss(x, y, nn::Reduction::None), {0, 4, 4}, 0);
    CHECK_THAT(message_of<ValueError>([&] { F::mse_loss(x, Tensor({1, 2})); }),
               Contains("mse_loss") && Contains("(3)") && Contains("(2)"));
}

TEST_CASE("hostile: mse_loss: NaN and empty inputs", "[nn][loss][hostile]") {
    REQUIRE(std::isnan(F::mse_loss(Tensor({1, kNaN}), Tensor({1, 1})).item()));
    // The mean over no elements is 0 (as cross_entropy with nothing to count), not an error.
    Tensor e = zeros({0, 4}, true);
    Tensor l = F::mse_loss(e, zeros({0, 4}));
    REQUIRE(l.item() == 0);
    l.backward();
    REQUIRE(e.grad().shape() == Shape{0, 4});
    REQUIRE(F::mse_loss(e, zeros({0, 4}), nn::Reduction::Sum).item() == 0);
}

TEST_CASE("binary_cross_entropy_with_logits on hand numbers and reductions", "[nn][loss][bce]") {
    // ℓ = max(x, 0) - x y + log(1 + e^(-|x|))
    const double x[] = {0, 2, -3}, y[] = {0, 1, 0.5};
    double l[3], total = 0;
    for (int i = 0; i < 3; ++i) {
        const double sig = 1 / (1 + std::exp(-x[i]));
        l[i] = -(y[i] * std::log(sig) + (1 - y[i]) * std::log(1 - sig));  // the textbook form
        total += l[i];
    }
    REQUIRE(l[0] == Approx(std::log(2.0)));
    Tensor logits({0, 2, -3}, true);
    Tensor targets({0, 1, 0.5});
    Tensor loss = F::binary_cross_entropy_with_logits(logits, targets);
    REQUIRE(loss.item() == Approx(total / 3).epsilon(1e-6));
    loss.backward();  // (σ(x) - y) / 3
    for (std::size_t i = 0; i < 3; ++i)
        REQUIRE(logits.grad().at({i}) == Approx((1 / (1 + std::exp(-x[i])) - y[i]) / 3).margin(1e-7));
    REQUIRE(F::binary_cross_entropy_with_logits(logits, targets, nn::Reduction::Sum).item() ==
            Approx(total).epsilon(1e-6));
    require_values(F::binary_cross_entropy_with_logits(logits, targets, nn::Reduction::None),
                   {real(l[0]), real(l[1]), real(l[2])}, 1e-6);
}

TEST_CASE("hostile: binary_cross_entropy_with_logits: |x| = 1e4 - NaN - bad targets - empty",
          "[nn][loss][bce][hostile]") {
    // The textbook form would take log(σ(-1e4)) = log(0) = -inf; the stable one gives exact values.
    Tensor x({1e4, -1e4, 1e4, -1e4}, true);
    Tensor y({1, 0, 0, 1});
    require_values(F::binary_cross_entropy_with_logits(x, y, nn::Reduction::None), {0, 0, 1e4, 1e4}, 0);
    Tensor loss = F::binary_cross_entropy_with_logits(x, y);
    REQUIRE(loss.item() == 5e3f);
    loss.backward();  // (σ(x) - y) / 4 = (0, 0, 1, -1) / 4
    require_values(x.grad(), {0, 0, 0.25, -0.25}, 0);

    Tensor bad({kNaN, 1});
    Tensor none = F::binary_cross_entropy_with_logits(bad, Tensor({1, 1}), nn::Reduction::None);
    REQUIRE(std::isnan(none.at({0})));
    REQUIRE(none.at({1}) == Approx(std::log1p(std::exp(-1.0))).epsilon(1e-6));

    // Targets are probabilities: outside [0, 1] (or NaN) is a mistake, e.g. class IDs passed
    // as floats, and would give a loss without meaning (here a negative one).
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0, 1}), Tensor({0, 2})); }),
               Contains("binary_cross_entropy_with_logits") && Contains("target 2 at position (1)") &&
                   Contains("[0, 1]"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0}), Tensor({-0.5})); }),
               Contains("target -0.5"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0}), Tensor({kNaN})); }),
               Contains("target nan"));
    CHECK_THAT(message_of<ValueError>([&] { F::binary_cross_entropy_with_logits(Tensor({0, 1}), Tensor({0})); }),
               Contains("same shape"));

    // x = ±∞: the limits, 0 when the target is exactly the side x points to, +∞ otherwise
    // (the formula itself would give ∞ - ∞ = nan). The gradient σ(x) - y stays finite.
    Tensor xi({kInf, -kInf, kInf, -kInf, kInf}, true);
    Tensor yi({1, 0, 0, 1, 0.5});
    require_values(F::binary_cross_entropy_with_logits(xi, yi, nn::Reduction::None), {0, 0, kInf, kInf, kInf}, 0);
    F::binary_cross_entropy_with_logits(xi, yi, nn::Reduction::Sum).backward();
    require_values(xi.grad(), {0, 0, 1, -1, 0.5}, 0);

    Tensor e = zeros({0}, true);
    Tensor le = F::binary_cross_entropy_with_logits(e, zeros({0}));
    REQUIRE(le.item() == 0);
    le.backward();
    REQUIRE(e.grad().shape() == Shape{0});
}

// =============================================================================================
// activations, Sequential
// =============================================================================================

TEST_CASE("gelu values and derivative", "[nn][activation]") {
    Tensor x({1, -1, 0, 3, -10}, true);
    Tensor y = F::gelu(x);
    // 2e-7 relative: about two float ulps, what the vectorised float Φ (nn/activation.cpp)
    // reaches at these points; test_layers.cpp measures its error over a dense grid.
    REQUIRE(y.at({0}) == Approx(0.8413447460685429).epsilon(2e-7));
    REQUIRE(y.at({1}) == Approx(-0.15865525393145707).epsilon(2e-7));
    REQUIRE(y.at({2}) == 0);
    REQUIRE(y.at({3}) == Approx(3 * 0.9986501019683699).epsilon(2e-7));
    // Far in the left tail: -10 Φ(-10) = -7.62e-23, not 0 (1 + erf(x/√2) cancels to 0 there).
    REQUIRE(y.at({4}) == Approx(-7.61985302416047e-23).epsilon(1e-5));
    // dy/dx = Φ(x) + x φ(x): at 0, 1/2; at 1, 0.8413447 + 0.2419707 = 1.0833155.
    y.backward(ones({5}));
    REQUIRE(x.grad().at({2}) == Approx(0.5));
    REQUIRE(x.grad().at({0}) == Approx(0.8413447460685429 + 0.24197072451914337).epsilon(1e-6));
}

TEST_CASE("hostile: gelu with ±inf and NaN", "[nn][activation][hostile]") {
    Tensor x({kInf, -kInf, kNaN}, true);
    Tensor y = F::gelu(x);
    REQUIRE(y.at({0}) == kInf);
    REQUIRE(y.at({1}) == 0);  // the limit x Φ(x) → 0, not -inf · 0 = nan
    REQUIRE(std::isnan(y.at({2})));
    y.backward(ones({3}));
    REQUIRE(x.grad().at({0}) == 1);
    REQUIRE(x.grad().at({1}) == 0);
    REQUIRE(std::isnan(x.grad().at({2})));
}

TEST_CASE("activation modules: Tanh - ReLU - GELU", "[nn][activation]") {
    Tensor x({-2, 0, 0.5});
    nn::Tanh tanh_m;
    nn::ReLU relu_m;
    nn::GELU gelu_m;
    require_values(tanh_m.forward(x), {real(std::tanh(-2.0)), 0, real(std::tanh(0.5))}, 1e-6);
    require_values(relu_m.forward(x), {0, 0, 0.5}, 0);
    require_values(gelu_m.forward(x), {real(-2 * 0.5 * std::erfc(2 / std::sqrt(2.0))), 0,
                                       real(0.5 * 0.5 * std::erfc(-0.5 / std::sqrt(2.0)))},
                   1e-6);
    REQUIRE(tanh_m.num_parameters() == 0);
    REQUIRE(relu_m.named_parameters().empty());
    REQUIRE(gelu_m.num_parameters() == 0);
}

TEST_CASE("Sequential: names by position or given - forward is the composition", "[nn][sequential]") {
    manual_seed(12);
    auto fc1 = std::make_shared<nn::Linear>(3, 4);
    auto fc2 = std::make_shared<nn::Linear>(4, 2);
    nn::Sequential net;
    net.push_back(fc1).push_back(std::make_shared<nn::Tanh>()).push_back(fc2);
    REQUIRE(net.size() == 3);
    std::vector<std::string> names;
    for (const auto& [n, _] : net.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    REQUIRE(net.num_parameters() == (3 * 4 + 4) + (4 * 2 + 2));
    Tensor x = randn({5, 3});
    REQUIRE(bits_equal(net.forward(x), fc2->forward(tanh(fc1->forward(x)))));

    nn::Sequential named;
    named.push_back("fc1", std::make_shared<nn::Linear>(3, 4))
        .push_back("act", std::make_shared<nn::GELU>())
        .push_back("fc2", std::make_shared<nn::Linear>(4, 2));
    names.clear();
    for (const auto& [n, _] : named.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    // A duplicate name throws and adds no layer.
    CHECK_THAT(message_of<ValueError>([&] { named.push_back("fc1", std::make_shared<nn::ReLU>()); }),
               Contains("'fc1' is already registered"));
    REQUIRE(named.size() == 3);
    // An empty Sequential is the identity.
    REQUIRE(nn::Sequential().forward(x).impl() == x.impl());
}

TEST_CASE("a small model trains end to end: Embedding → Linear → cross_entropy", "[nn][integration]") {
    // Memorise 4 (id → class) pairs: the loss must fall from ~log 3 to near 0.
    manual_seed(13);
    TinyNet net;  // V = 5, d = 3, 2 classes
    IndexTensor ids{0, 1, 2, 3};
    IndexTensor y{0, 1, 1, 0};
    float first = 0, last = 0;
    for (int step = 0; step < 200; ++step) {
        Tensor loss = F::cross_entropy(net.forward(ids), y);
        if (step == 0) first = loss.item();
        last = loss.item();
        net.zero_grad();
        loss.backward();
        NoGradGuard no_grad;
        for (auto& p : net.parameters()) p.data() -= real(0.5) * p.grad().data();  // plain SGD
    }
    REQUIRE(first > 0.3);
    REQUIRE(last < 0.05);
    REQUIRE(net.emb->weight.grad().at({4, 0}) == 0);  // row 4 was never looked up
}
