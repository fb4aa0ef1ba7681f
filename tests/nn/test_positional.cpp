// tests/nn/test_positional.cpp — nn/positional (float32 build): learned, sinusoidal and rotary
// positions.
//
//   * values against PyTorch 1.13 from tests/reference/positional_reference.json (written by
//     tests/reference/make_positional_reference.py: the tutorial's PositionalEncoding table and
//     Meta's complex-number RoPE, output and dL/dx);
//   * hand values (PE at t = 0 and 1; a 90° rotation);
//   * RoPE's defining property: ⟨R(m)q, R(n)k⟩ depends only on m − n;
//   * learned positions as a table over 0 .. T-1;
//   * bad input (odd hd, wrong positions length, negative positions, T too long).
// The double-precision gradcheck of apply_rotary is in gradcheck_positional.cpp.
//
// Legend: B batch, H heads, T time, d width, hd head width.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"
#include "reference/reference_json.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

Tensor positional_tensor_of(const json& values, const Shape& shape) {
    Array a = Array::from_shape(shape);
    REQUIRE(values.size() == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(values[i].get<double>());
    return from_array(std::move(a));
}

IndexTensor index_of(const json& values) {
    IndexArray a = IndexArray::from_shape({values.size()});
    for (std::size_t i = 0; i < a.size(); ++i) a(i) = values[i].get<std::int64_t>();
    return IndexTensor(std::move(a));
}

double dot(const Tensor& a, const Tensor& b) {
    double s = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) s += double(a.data().data()[i]) * double(b.data().data()[i]);
    return s;
}

}  // namespace

// ---- sinusoidal ---------------------------------------------------------------------------------

TEST_CASE("sinusoidal_positions equals the PyTorch tutorial's table", "[nn][positional][sinusoidal]") {
    for (const json& c : reference_json("positional_reference.json").at("sinusoidal")) {
        const auto T = c.at("T").get<std::int64_t>(), d = c.at("d").get<std::int64_t>();
        INFO("T = " << T << ", d = " << d);
        const Tensor pe = nn::sinusoidal_positions(T, d);
        REQUIRE_FALSE(pe.requires_grad());
        require_values(pe, positional_tensor_of(c.at("pe"), {std::int64_t(T), std::int64_t(d)}), 1e-6);
    }
}

TEST_CASE("sinusoidal_positions by hand: row 0 is sin 0 cos 0 - row 1 the first frequencies", "[nn][positional][sinusoidal]") {
    // d = 4: ω_0 = 1, ω_1 = 10000^(-2/4) = 0.01.
    const Tensor pe = nn::sinusoidal_positions(2, 4);
    require_values(pe, Tensor({{0, 1, 0, 1}, {std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)}}), 1e-7);
    // Odd d = 3: the last column is the sine of pair 1 (ω_1 = 10000^(-2/3)); no cosine partner.
    const double w1 = std::pow(10000.0, -2.0 / 3.0);
    require_values(nn::sinusoidal_positions(2, 3), Tensor({{0, 1, 0}, {std::sin(1.0), std::cos(1.0), static_cast<real>(std::sin(w1))}}),
                   1e-7);
    CHECK_THAT(message_of<ValueError>([] { nn::sinusoidal_positions(0, 4); }),
               Contains("sinusoidal_positions") && Contains("T = 0"));
    CHECK_THAT(message_of<ValueError>([] { nn::sinusoidal_positions(4, -2); }), Contains("d = -2"));
}

// ---- learned ------------------------------------------------------------------------------------

TEST_CASE("LearnedPositions: rows 0 .. T-1 of a trained table", "[nn][positional][learned]") {
    nn::LearnedPositions wpe(/*max_len=*/8, /*d=*/3);
    REQUIRE(wpe.named_parameters().size() == 1);
    REQUIRE(wpe.named_parameters()[0].first == "weight");
    const Tensor p = wpe.forward(5);
    REQUIRE(p.shape() == Shape{5, 3});
    for (std::size_t t = 0; t < 5; ++t)
        for (std::size_t j = 0; j < 3; ++j) REQUIRE(p.data()(t, j) == wpe.weight.data()(t, j));
    // Only the rows used get gradient.
    p.sum().backward();
    for (std::size_t t = 0; t < 8; ++t) REQUIRE(wpe.weight.grad().data()(t, 0) == (t < 5 ? 1 : 0));
    CHECK_THAT(message_of<ValueError>([&] { wpe.forward(9); }), Contains("T = 9") && Contains("[0, 8]"));
    CHECK_THAT(message_of<ValueError>([&] { wpe.forward(-1); }), Contains("T = -1"));
}

// ---- rotary ---------------------------------------------------------------------------------------

TEST_CASE("apply_rotary equals Meta's complex-number RoPE in output and gradient", "[nn][positional][rope]") {
    for (const json& c : reference_json("positional_reference.json").at("rope")) {
        const Shape shape = c.at("shape").get<Shape>();
        INFO("x " << shape_str(shape) << " base " << c.at("base").get<double>());
        Tensor x = positional_tensor_of(c.at("x"), shape);
        x.requires_grad_();
        const Tensor w = positional_tensor_of(c.at("w"), shape);
        const Tensor y = nn::apply_rotary(x, index_of(c.at("positions")), c.at("base").get<double>());
        require_values(y, positional_tensor_of(c.at("y"), shape), 1e-5);
        sum(mul(y, w)).backward();
        require_values(x.grad(), positional_tensor_of(c.at("dx"), shape), 1e-5);
    }
}

TEST_CASE("apply_rotary by hand: position 0 is the identity - a turn by 1 radian", "[nn][positional][rope]") {
    // hd = 2, base irrelevant for pair 0 (θ_0 = 1): the angle is the position in radians.
    const Tensor x({{1.0, 2.0}, {1.0, 2.0}});  // (T, hd) = (2, 2)
    require_values(nn::apply_rotary(x, IndexTensor{0, 0}), x, 0);
    // pos 1 rotates pair 0 by 1 rad: (cos1 − 2 sin1, sin1 + 2 cos1).
    require_values(nn::apply_rotary(x, IndexTensor{0, 1}),
                   Tensor({{1.0, 2.0}, {std::cos(1.0) - 2 * std::sin(1.0), std::sin(1.0) + 2 * std::cos(1.0)}}), 1e-6);
    // Pair 1 of hd = 4 with base 10000 turns at θ_1 = 10000^(-1/2) = 0.01 rad per position.
    const Tensor x4({{0.0, 0.0, 1.0, 0.0}});
    require_values(nn::apply_rotary(x4, IndexTensor{100}), Tensor({{0.0, 0.0, std::cos(1.0), std::sin(1.0)}}), 1e-6);
    // A rotation keeps lengths.
    const Tensor r = randn({3, 5, 8});
    const Tensor y = nn::apply_rotary(r, IndexTensor{4, 9, 0, 2, 77});
    REQUIRE(dot(y, y) == Approx(dot(r, r)).epsilon(1e-5));
}

TEST_CASE("apply_rotary: the score <R(m)q - R(n)k> depends only on m - n", "[nn][positional][rope]") {
    // The same q and k placed at positions (m, n) for several pairs with the same offset.
    const Tensor q = randn({1, 16}), k = randn({1, 16});
    auto score = [&](std::int64_t m, std::int64_t n) {
        return dot(nn::apply_rotary(q, IndexTensor{m}), nn::apply_rotary(k, IndexTensor{n}));
    };
    for (std::int64_t offset : {0, 1, 3, -5}) {
        INFO("n - m = " << offset);
        const std::int64_t base_m = offset < 0 ? 5 : 0;
        const double s0 = score(base_m, base_m + offset);
        for (std::int64_t m : {1, 7, 40, 300}) REQUIRE(score(base_m + m, base_m + m + offset) == Approx(s0).margin(1e-4));
    }
    // ...and it does depend on the offset (otherwise the test above could not fail).
    REQUIRE(std::abs(score(0, 1) - score(0, 4)) > 1e-3);
}

TEST_CASE("hostile: apply_rotary: odd hd - positions of the wrong length - negative positions",
          "[nn][positional][rope][hostile]") {
    CHECK_THAT(message_of<ValueError>([] { nn::apply_rotary(ones({2, 3, 5}), IndexTensor{0, 1, 2}); }),
               Contains("apply_rotary") && Contains("hd = 5") && Contains("(2, 3, 5)"));
    CHECK_THAT(message_of<ValueError>([] { nn::apply_rotary(ones({2, 3, 4}), IndexTensor{0, 1}); }),
               Contains("apply_rotary") && Contains("(2)") && Contains("(3,)"));
    CHECK_THAT(message_of<ValueError>([] { nn::apply_rotary(ones({3, 4}), IndexTensor{{0, 1, 2}}); }),
               Contains("(1, 3)"));
    CHECK_THAT(message_of<IndexError>([] { nn::apply_rotary(ones({3, 4}), IndexTensor{0, -2, 1}); }),
               Contains("position -2 at index 1"));
    CHECK_THAT(message_of<ValueError>([] { nn::apply_rotary(ones({4}), IndexTensor{0}); }), Contains("(..., T, hd)"));
    CHECK_THAT(message_of<ValueError>([] { nn::apply_rotary(ones({1, 4}), IndexTensor{0}, 0.0); }), Contains("base"));
}
