// tests/nn/gradcheck_dropout.cpp — dropout with a fixed mask against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_dropout && build/tests/gradcheck_dropout`.
#include <catch2/catch.hpp>

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
