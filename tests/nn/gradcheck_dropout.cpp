// tests/nn/gradcheck_dropout.cpp — dropout with a fixed mask against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_dropout && build/tests/gradcheck_dropout`.
#include <catch2/catch.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== dropout ========================================================================================

// The mask is random, so the function is reseeded before every evaluation: the finite
// differences and the backward then all see the same mask.
TEST_CASE("gradcheck dropout with a fixed mask", "[gradcheck][nn][dropout]") {
    manual_seed(27);
    Tensor x = randn({4, 7}, true);
    for (double p : {0.2, 0.5, 1.0}) {
        INFO("p = " << p);
        REQUIRE_GRADCHECK(
            [p](const auto& v) {
                manual_seed(1234);
                return F::dropout(v[0], p);
            },
            x);
    }
    // And through the module.
    auto drop = std::make_shared<nn::Dropout>(0.3);
    REQUIRE_GRADCHECK(
        [drop](const auto& v) {
            manual_seed(99);
            return drop->forward(v[0]);
        },
        x);
}

// In double the scale shows which p it was computed from: p = 1/3 draws with p' = ⌊2³²/3⌋/2³²,
// and 1/(1 - p') differs from 1/(1 - 1/3) = 1.5 in the 11th digit. Only 1/(1 - p') keeps E[y] = x.
TEST_CASE("dropout scales by 1/(1 - p') for the p' = floor(p 2^32)/2^32 it draws with",
          "[nn][dropout][regression]") {
    const double p = 1.0 / 3;
    const double p_drawn = std::ldexp(std::floor(std::ldexp(p, 32)), -32);
    manual_seed(3);
    const Tensor y = F::dropout(ones({1000}), p, true);
    int kept = 0;
    for (double v : y.data()) {
        if (v == 0) continue;
        ++kept;
        REQUIRE(v == 1 / (1 - p_drawn));
        REQUIRE(v != 1.5);
    }
    REQUIRE(kept > 0);
}
