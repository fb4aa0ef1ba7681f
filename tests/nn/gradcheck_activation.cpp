// tests/nn/gradcheck_activation.cpp — gelu, both forms, and silu against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_activation && build/tests/gradcheck_activation`.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <type_traits>
#include <vector>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== GELU ===========================================================================================

TEST_CASE("gradcheck gelu none and tanh", "[gradcheck][nn][activation][gelu]") {
    manual_seed(21);
    for (const std::string approximate : {"none", "tanh"}) {
        INFO("approximate = " << approximate);
        Tensor x = from_array(Array(3 * randn({4, 5}).data()), true);
        REQUIRE_GRADCHECK([approximate](const auto& v) { return F::gelu(v[0], approximate); }, x);
        // Both sides of the tails, the kink region around -0.75, and past |x| = 20 (tanh's cutoff).
        Tensor specific({-25, -19.5, -8, -3, -0.75, -0.1, 0, 0.1, 0.75, 3, 8, 19.5, 25}, true);
        REQUIRE_GRADCHECK([approximate](const auto& v) { return F::gelu(v[0], approximate); }, specific);
    }
}

// ==== activations, modules ===================================================================================

TEST_CASE("gradcheck gelu", "[gradcheck][nn][activation]") {
    manual_seed(11);
    Tensor x = from_array(Array(3 * randn({4, 5}).data()), true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::gelu(v[0]); }, x);
    Tensor specific({-6, -2.5, -1, -0.3, 0, 0.3, 1, 2.5, 6}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::gelu(v[0]); }, specific);
}

// ==== SiLU ===========================================================================================

TEST_CASE("gradcheck silu", "[gradcheck][nn][activation][silu]") {
    manual_seed(12);
    Tensor x = from_array(Array(3 * randn({4, 5}).data()), true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::silu(v[0]); }, x);
    // Both tails, the minimum near -1.28, and 0.
    Tensor specific({-40, -8, -3, -1.28, -0.5, 0, 0.5, 1, 3, 8, 40}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::silu(v[0]); }, specific);
    auto m = std::make_shared<nn::SiLU>();
    REQUIRE_GRADCHECK([m](const auto& v) { return m->forward(v[0]); }, x);
}
