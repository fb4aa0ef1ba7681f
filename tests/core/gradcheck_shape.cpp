// tests/core/gradcheck_shape.cpp — reshape, transpose, permute, concat and stack against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_shape && build/tests/gradcheck_shape`.
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

// ==== shape =============================================================================================

TEST_CASE("gradcheck reshape - transpose - permute", "[gradcheck][shape]") {
    manual_seed(9);
    Tensor x = leaf({2, 3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return reshape(v[0], {4, -1}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0].view({-1}) * v[0].reshape({24}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return transpose(v[0], 0, 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return transpose(v[0], -1, 1); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return permute(v[0], {2, 0, 1}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return permute(v[0], {1, 2, 0}) * permute(v[0], {1, 2, 0}).exp(); }, x);
}

TEST_CASE("gradcheck concat along each dim - with an input that needs no grad", "[gradcheck][shape]") {
    manual_seed(10);
    Tensor a = leaf({2, 3, 2}), b = leaf({2, 1, 2}), c = randn({2, 2, 2});
    REQUIRE_GRADCHECK([c](const auto& v) { return concat({v[0], c, v[1]}, 1); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0]}, 0); }, a);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0] * v[0]}, -1); }, a);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0]}, 2); }, a);
}

TEST_CASE("gradcheck stack - every new dim, negative dims, one tensor twice", "[gradcheck][shape]") {
    manual_seed(211);
    Tensor a = leaf({2, 3}), b = leaf({2, 3});
    for (int d : {0, 1, 2, -1, -3}) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return stack({v[0], v[1]}, d); }, a, b);
    }
    REQUIRE_GRADCHECK([](const auto& v) { return stack({v[0], v[0] * v[0]}, 1); }, a);
}
