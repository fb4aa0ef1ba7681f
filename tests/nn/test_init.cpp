// tests/nn/test_init.cpp — nn/init (float32 build): torch.nn.init's initialisers.
//
//   * fans, gains, and each initialiser's bound or std against PyTorch 1.13, from
//     tests/reference/init_reference.json (written by tests/reference/make_init_reference.py,
//     which records the exact range torch's own function draws from);
//   * large draws: min, max, mean and std within tolerances a wrong formula cannot meet (a bound
//     from the wrong fan is off by √2 at least);
//   * the same draws as randn/rand under manual_seed, no graph, version bumped, errors named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"
#include "reference/reference_json.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
using nlohmann::json;
namespace init = xgrad::nn::init;

namespace {

Shape shape_of(const json& j) {
    Shape s;
    for (const auto& n : j) s.push_back(n.get<std::size_t>());
    return s;
}

struct Stats {
    double min, max, mean, std;  // std: the population standard deviation
};

Stats stats_of(const Tensor& t) {
    const Array& a = t.data();
    double sum = 0, sq = 0;
    for (real v : a) sum += v;
    const double mean = sum / double(a.size());
    for (real v : a) sq += (v - mean) * (v - mean);
    return {*std::min_element(a.begin(), a.end()), *std::max_element(a.begin(), a.end()), mean,
            std::sqrt(sq / double(a.size()))};
}

// U(lo, hi) drawn n ≥ 4096 times: every value inside, the extremes within 2% of the width of the
// ends (missing them has probability below 0.99^4096 ≈ 1e-18), mean and std within 5 sigma.
void require_uniform(const Tensor& t, double lo, double hi) {
    const Stats s = stats_of(t);
    const double n = double(t.numel()), width = hi - lo, sd = width / std::sqrt(12.0);
    REQUIRE(n >= 4096);
    CHECK(s.min >= lo);
    CHECK(s.max <= hi);
    CHECK(s.min <= lo + 0.02 * width);
    CHECK(s.max >= hi - 0.02 * width);
    CHECK(std::abs(s.mean - (lo + hi) / 2) < 5 * sd / std::sqrt(n));
    CHECK(std::abs(s.std - sd) < 0.04 * sd);
}

// N(mean, std²) drawn n ≥ 4096 times: mean within 5 sigma, the sample std within 5% (its own
// relative sd is 1/√(2n) ≤ 1.1%), and tails reaching beyond 3 std but not 7.
void require_normal(const Tensor& t, double mean, double std) {
    const Stats s = stats_of(t);
    const double n = double(t.numel());
    REQUIRE(n >= 4096);
    CHECK(std::abs(s.mean - mean) < 5 * std / std::sqrt(n));
    CHECK(std::abs(s.std - std) < 0.05 * std);
    CHECK(std::max(s.max - mean, mean - s.min) > 3 * std);
    CHECK(std::max(s.max - mean, mean - s.min) < 7 * std);
}

}  // namespace

TEST_CASE("init: fans match torch.nn.init._calculate_fan_in_and_fan_out", "[init]") {
    for (const auto& r : reference_json("init_reference.json")["fans"]) {
        const Shape shape = shape_of(r["shape"]);
        INFO("shape " << shape_str(shape));
        const auto [fan_in, fan_out] = init::_calculate_fan_in_and_fan_out(zeros(shape));
        CHECK(fan_in == r["fan_in"].get<std::int64_t>());
        CHECK(fan_out == r["fan_out"].get<std::int64_t>());
    }
    // A (16, 8, 3, 3) conv weight by hand: fan_in = 8·9, fan_out = 16·9.
    CHECK(init::_calculate_fan_in_and_fan_out(zeros({16, 8, 3, 3})) == std::pair<std::int64_t, std::int64_t>{72, 144});
    REQUIRE_THAT(message_of<ValueError>([] { init::_calculate_fan_in_and_fan_out(zeros({5})); }),
                 Contains("at least 2 dims") && Contains("(5)"));
    REQUIRE_THROWS_AS(init::_calculate_fan_in_and_fan_out(Tensor(real(1))), ValueError);
}

TEST_CASE("init: calculate_gain matches PyTorch", "[init]") {
    for (const auto& r : reference_json("init_reference.json")["gains"]) {
        const std::string name = r["nonlinearity"];
        const std::optional<double> param =
            r["param"].is_null() ? std::nullopt : std::optional<double>(r["param"].get<double>());
        INFO(name << " param " << (param ? std::to_string(*param) : "none"));
        CHECK(init::calculate_gain(name, param) == Approx(r["gain"].get<double>()).epsilon(1e-15));
    }
    CHECK(init::calculate_gain("tanh") == Approx(5.0 / 3.0));
    REQUIRE_THAT(message_of<ValueError>([] { init::calculate_gain("gelu"); }),
                 Contains("calculate_gain") && Contains("'gelu'"));
}

TEST_CASE("init: xavier_ and kaiming_ draw from PyTorch's range", "[init]") {
    for (const auto& r : reference_json("init_reference.json")["draws"]) {
        const std::string fn = r["fn"];
        const Shape shape = shape_of(r["shape"]);
        const json& kw = r["kwargs"];
        INFO(fn << " " << shape_str(shape) << " " << kw.dump());
        manual_seed(1);
        Tensor w = zeros(shape);
        const double a = kw.value("a", 0.0);
        const std::string mode = kw.value("mode", "fan_in"), nonlinearity = kw.value("nonlinearity", "leaky_relu");
        if (fn == "xavier_uniform_") init::xavier_uniform_(w, kw.value("gain", 1.0));
        else if (fn == "xavier_normal_") init::xavier_normal_(w, kw.value("gain", 1.0));
        else if (fn == "kaiming_uniform_") init::kaiming_uniform_(w, a, mode, nonlinearity);
        else if (fn == "kaiming_normal_") init::kaiming_normal_(w, a, mode, nonlinearity);
        else FAIL("unknown fn " << fn);
        if (r["dist"] == "uniform") require_uniform(w, r["low"].get<double>(), r["high"].get<double>());
        else require_normal(w, r["mean"].get<double>(), r["std"].get<double>());
    }
}

TEST_CASE("init: a 256x256 xavier_uniform_ draw reaches its bound √(6/512) from inside", "[init]") {
    manual_seed(0);
    const Stats s = stats_of(init::xavier_uniform_(zeros({256, 256})));
    const double bound = std::sqrt(6.0 / 512.0);  // 0.10825...
    CHECK(s.max <= bound);
    CHECK(s.max >= 0.98 * bound);
    CHECK(s.min >= -bound);
    CHECK(s.min <= -0.98 * bound);
}

TEST_CASE("init: Linear's default is kaiming_uniform_(a = √5), Embedding's is N(0, 1)", "[init]") {
    manual_seed(2);
    nn::Linear lin(512, 128);  // U(±1/√512), PyTorch's reference bound for (128, 512) with a = √5
    double bound = 0;
    for (const auto& r : reference_json("init_reference.json")["draws"])
        if (r["fn"] == "kaiming_uniform_" && r["shape"] == json::array({128, 512})) bound = r["high"];
    REQUIRE(bound == Approx(1 / std::sqrt(512.0)));
    require_uniform(lin.weight, -bound, bound);
    nn::Embedding emb(256, 64);
    require_normal(emb.weight, 0, 1);
}

TEST_CASE("init: normal_, uniform_ and the fills give their values", "[init]") {
    manual_seed(3);
    require_normal(init::normal_(zeros({256, 256}), 3.0, 0.5), 3.0, 0.5);
    require_uniform(init::uniform_(zeros({256, 256}), -2.0, 5.0), -2.0, 5.0);
    require_uniform(init::uniform_(zeros({64, 64})), 0.0, 1.0);  // default U[0, 1)
    const Tensor w = zeros({2, 3});
    init::constant_(w, -1.5);
    require_values(w, full({2, 3}, -1.5), 0);
    require_values(init::ones_(w), ones({2, 3}), 0);
    require_values(init::zeros_(w), zeros({2, 3}), 0);
    require_values(init::normal_(w, 7.0, 0.0), full({2, 3}, 7.0), 0);  // std = 0 is allowed, as torch
    require_values(init::uniform_(w, 2.0, 2.0), full({2, 3}, 2.0), 0);
}

TEST_CASE("init: the same draws as randn and rand under manual_seed", "[init]") {
    // normal_(w, 0, s) is randn(shape) · s value for value: examples/gpt's numbers rely on it.
    manual_seed(11);
    const Tensor expected = randn({8, 5}) * real(0.02);
    manual_seed(11);
    REQUIRE(bits_equal(init::normal_(zeros({8, 5}), 0.0, 0.02), expected));
    manual_seed(12);
    const Tensor u = rand({3, 7});
    manual_seed(12);
    REQUIRE(bits_equal(init::uniform_(zeros({3, 7})), u));
    // Reproducible, and a second call continues the stream.
    manual_seed(5);
    const Tensor a1 = init::kaiming_normal_(zeros({6, 4})), a2 = init::kaiming_normal_(zeros({6, 4}));
    manual_seed(5);
    REQUIRE(bits_equal(init::kaiming_normal_(zeros({6, 4})), a1));
    REQUIRE(bits_equal(init::kaiming_normal_(zeros({6, 4})), a2));
    REQUIRE(!bits_equal(a1, a2));
}

TEST_CASE("init: writes in place, records no graph, bumps the version", "[init]") {
    Tensor w = randn({4, 3}, /*requires_grad=*/true);
    const auto v0 = w.impl()->version;
    const Tensor r = init::xavier_uniform_(w);
    CHECK(r.impl() == w.impl());  // the same handle, as torch returns its argument
    CHECK(w.impl()->version > v0);
    CHECK(w.is_leaf());
    CHECK(w.grad_fn() == nullptr);
    CHECK(w.requires_grad());
    // An op that saved w's old values refuses to run its backward after the re-initialisation.
    Tensor y = sum(mul(w, w));
    init::normal_(w, 0.0, 0.02);
    REQUIRE_THROWS_AS(y.backward(), ValueError);
}

TEST_CASE("init: bad input throws ValueError naming the function", "[init]") {
    const Tensor none;
    CHECK_THAT(message_of<ValueError>([&] { init::normal_(none); }), Contains("normal_") && Contains("undefined"));
    CHECK_THAT(message_of<ValueError>([&] { init::uniform_(none); }), Contains("uniform_"));
    CHECK_THAT(message_of<ValueError>([&] { init::constant_(none, 1); }), Contains("constant_"));
    CHECK_THAT(message_of<ValueError>([&] { init::zeros_(none); }), Contains("zeros_"));
    CHECK_THAT(message_of<ValueError>([&] { init::ones_(none); }), Contains("ones_"));
    CHECK_THAT(message_of<ValueError>([&] { init::xavier_uniform_(none); }), Contains("xavier_uniform_"));
    CHECK_THAT(message_of<ValueError>([&] { init::kaiming_normal_(none); }), Contains("kaiming_normal_"));
    const Tensor w = zeros({3, 4}), v = zeros({5});
    CHECK_THAT(message_of<ValueError>([&] { init::normal_(w, 0, -1); }), Contains("normal_") && Contains("-1"));
    CHECK_THAT(message_of<ValueError>([&] { init::uniform_(w, 1, 0); }), Contains("uniform_") && Contains("[1, 0)"));
    CHECK_THROWS_AS(init::uniform_(w, 0, std::nan("")), ValueError);
    CHECK_THAT(message_of<ValueError>([&] { init::xavier_uniform_(v); }),
               Contains("xavier_uniform_") && Contains("(5)"));
    CHECK_THAT(message_of<ValueError>([&] { init::xavier_normal_(v); }), Contains("xavier_normal_"));
    CHECK_THAT(message_of<ValueError>([&] { init::kaiming_uniform_(v); }), Contains("kaiming_uniform_"));
    CHECK_THAT(message_of<ValueError>([&] { init::kaiming_uniform_(w, 0, "fan_avg"); }),
               Contains("kaiming_uniform_") && Contains("'fan_avg'"));
    CHECK_THAT(message_of<ValueError>([&] { init::kaiming_normal_(w, 0, "fan_in", "softplus"); }),
               Contains("kaiming_normal_") && Contains("'softplus'"));
    // Nothing was written by a refused call.
    require_values(w, zeros({3, 4}), 0);
}

TEST_CASE("init: tensors with no values are returned unchanged", "[init]") {
    CHECK(init::kaiming_uniform_(zeros({0, 5})).numel() == 0);
    CHECK(init::xavier_normal_(zeros({0, 0})).numel() == 0);
    CHECK(init::normal_(zeros({0})).numel() == 0);
}

TEST_CASE("init: a tied head from normal_(w, 0, 0.02) starts at ln V, from N(0, 1) far above", "[init]") {
    // V = 76 as the example; h (N, d) stands in for LayerNorm outputs (‖h‖ ≈ √d).
    const std::int64_t V = 76, d = 32, N = 256;
    manual_seed(4);
    auto wte = std::make_shared<nn::Embedding>(V, d);
    auto head = std::make_shared<nn::Linear>(d, V, /*bias=*/false);
    nn::tie_weights(*head, *wte);
    const Tensor h = randn({std::size_t(N), std::size_t(d)});
    const IndexTensor y = randint(0, V, {std::size_t(N)});
    const double ln_V = std::log(double(V));  // 4.33 nats
    const double loss_default = nn::functional::cross_entropy(head->forward(h), y).item();
    nn::init::normal_(wte->weight, 0.0, 0.02);
    const double loss_gpt2 = nn::functional::cross_entropy(head->forward(h), y).item();
    CHECK(loss_default > 3 * ln_V);  // ≈ 14 nats here: logits of std ‖h‖ ≈ √32
    CHECK(std::abs(loss_gpt2 - ln_V) < 0.05);
}
