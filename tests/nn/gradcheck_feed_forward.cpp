// tests/nn/gradcheck_feed_forward.cpp — the SwiGLU feed-forward against finite differences, with
// respect to x and to each of its weights and biases.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_feed_forward && build/tests/gradcheck_feed_forward`.
#include <catch2/catch.hpp>

#include <memory>
#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck SwiGLU - x and the weights w1 w2 w3", "[gradcheck][nn][feed_forward]") {
    manual_seed(31);
    auto ff = std::make_shared<nn::SwiGLU>(4, 6);
    Tensor x = leaf({2, 3, 4});
    REQUIRE_GRADCHECK([ff](const auto& v) { return ff->forward(v[0]); }, x, ff->w1->weight, ff->w2->weight,
                      ff->w3->weight);
}

TEST_CASE("gradcheck SwiGLU with biases", "[gradcheck][nn][feed_forward]") {
    manual_seed(32);
    auto ff = std::make_shared<nn::SwiGLU>(3, 5, /*bias=*/true);
    Tensor x = leaf({4, 3});
    REQUIRE_GRADCHECK([ff](const auto& v) { return ff->forward(v[0]); }, x, ff->w1->bias, ff->w2->bias,
                      ff->w3->bias);
    REQUIRE_GRADCHECK([ff](const auto& v) { return ff->forward(v[0]); }, x, ff->w1->weight, ff->w3->weight);
}
