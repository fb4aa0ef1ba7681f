// tests/core/gradcheck_reduction.cpp — sum, mean and max (inputs without ties), over all elements and
// along each dim, and cumsum along each dim, against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_reduction && build/tests/gradcheck_reduction`.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== reductions ======================================================================================

TEST_CASE("gradcheck sum and mean - all and along each dim", "[gradcheck][reduce]") {
    manual_seed(7);
    Tensor x = leaf({2, 3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return sum(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return mean(v[0]); }, x);
    for (int d = -3; d < 3; ++d)
        for (bool keep : {false, true}) {
            INFO("dim " << d << " keepdim " << keep);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return sum(v[0], d, keep); }, x);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return mean(v[0], d, keep); }, x);
        }
}

TEST_CASE("gradcheck max - all and along each dim (no ties)", "[gradcheck][reduce]") {
    manual_seed(8);
    Tensor x = leaf({3, 4, 2});  // continuous values: ties have probability 0
    REQUIRE_GRADCHECK([](const auto& v) { return max(v[0]); }, x);
    for (int d = 0; d < 3; ++d)
        for (bool keep : {false, true}) {
            INFO("dim " << d << " keepdim " << keep);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return max(v[0], d, keep); }, x);
        }
    REQUIRE_GRADCHECK([](const auto& v) { return max(v[0] * v[0], -1); }, x);
}

TEST_CASE("gradcheck cumsum - dims, negative dims", "[gradcheck][reduce]") {
    manual_seed(210);
    Tensor x = leaf({2, 3, 4});
    for (int d : {0, 1, 2, -1, -3}) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return cumsum(v[0], d); }, x);
    }
}
