// tests/nn/test_feed_forward.cpp — nn/feed_forward (float32): LLaMA's hidden width at a few d,
// the SwiGLU module's names and shapes, its forward by hand on 2×2 weights, and bad sizes.
// Gradchecks: gradcheck_feed_forward.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// h = multiple_of · ⌈⌊8d/3⌋ / multiple_of⌉:
//   d 128: ⌊1024/3⌋ = 341 → 384 (6 · 64);   d 64: ⌊512/3⌋ = 170 → 192;   d 256: ⌊2048/3⌋ = 682 → 704
TEST_CASE("swiglu_hidden_width - LLaMA's rule by hand", "[nn][feed_forward]") {
    REQUIRE(nn::swiglu_hidden_width(128) == 384);
    REQUIRE(nn::swiglu_hidden_width(64) == 192);
    REQUIRE(nn::swiglu_hidden_width(256) == 704);
    // multiple_of 1 leaves ⌊8d/3⌋ as it is.
    REQUIRE(nn::swiglu_hidden_width(128, 1) == 341);
    REQUIRE(nn::swiglu_hidden_width(64, 1) == 170);
    REQUIRE(nn::swiglu_hidden_width(256, 1) == 682);
    REQUIRE(nn::swiglu_hidden_width(4096, 256) == 11008);  // LLaMA-7B's FeedForward width
    // 2^58 is the largest d whose 8d/3 cannot overflow int64; beyond it, a refusal, not a wrapped 0
    REQUIRE(nn::swiglu_hidden_width(std::int64_t(1) << 58, 1) == (std::int64_t(1) << 61) / 3);
    REQUIRE_THROWS_WITH(nn::swiglu_hidden_width(std::int64_t(1) << 61), Catch::Contains("too large"));
    REQUIRE_THROWS_WITH(nn::swiglu_hidden_width(128, INT64_MAX), Catch::Contains("too large"));
}

TEST_CASE("SwiGLU: submodules w1 w2 w3 - shapes - no bias by default", "[nn][feed_forward]") {
    nn::SwiGLU ff(8, 24);
    REQUIRE(names_of(ff.named_parameters()) == std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"});
    REQUIRE(ff.w1->weight.shape() == Shape{24, 8});
    REQUIRE(ff.w2->weight.shape() == Shape{8, 24});
    REQUIRE(ff.w3->weight.shape() == Shape{24, 8});
    REQUIRE(ff.num_parameters() == 3 * 8 * 24);
    REQUIRE(ff.forward(randn({2, 5, 8})).shape() == Shape{2, 5, 8});
    nn::SwiGLU biased(8, 24, /*bias=*/true);
    REQUIRE(biased.num_parameters() == 3 * 8 * 24 + 24 + 8 + 24);
}

// d = hidden = 2, no bias, W1 = I, W3 = [[2, 0], [0, -1]], W2 = [[1, 1], [0, 1]], x = [1, -1]:
//   w1 x = [1, -1],  silu = [σ(1), -σ(-1)] = [0.7310586, -0.2689414],  w3 x = [2, 1]
//   h = silu ⊙ w3 x = [1.4621172, -0.2689414],  y = W2 h = [1.1931757, -0.2689414]
TEST_CASE("SwiGLU forward by hand", "[nn][feed_forward]") {
    nn::SwiGLU ff(2, 2);
    ff.w1->weight.mutable_data() = Tensor({{1, 0}, {0, 1}}).data();
    ff.w3->weight.mutable_data() = Tensor({{2, 0}, {0, -1}}).data();
    ff.w2->weight.mutable_data() = Tensor({{1, 1}, {0, 1}}).data();
    require_values(ff.forward(Tensor({{1, -1}})), Tensor({{1.19317573589, -0.26894142137}}), 1e-6);
}

TEST_CASE("hostile: SwiGLU and swiglu_hidden_width with bad sizes", "[nn][feed_forward][hostile]") {
    CHECK_THAT(message_of<ValueError>([] { nn::swiglu_hidden_width(0); }),
               Contains("swiglu_hidden_width") && Contains("d = 0") && Contains("multiple_of = 64"));
    CHECK_THAT(message_of<ValueError>([] { nn::swiglu_hidden_width(128, -64); }), Contains("multiple_of = -64"));
    CHECK_THAT(message_of<ValueError>([] { nn::SwiGLU(0, 8); }), Contains("SwiGLU") && Contains("d = 0"));
    CHECK_THAT(message_of<ValueError>([] { nn::SwiGLU(8, -3); }), Contains("SwiGLU") && Contains("hidden = -3"));
    nn::SwiGLU ff(8, 24);
    CHECK_THAT(message_of<ValueError>([&] { ff.forward(randn({2, 7})); }), Contains("7"));
}
