// tests/core/gradcheck_math_ops.cpp — sqrt, rsqrt and var (dims, keepdim, unbiased), abs, clamp,
// minimum and maximum (broadcast; away from kinks and ties) against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_math_ops && build/tests/gradcheck_math_ops`.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include <xtensor/xoperation.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== math =========================================================================================

TEST_CASE("gradcheck sqrt", "[gradcheck][math]") {
    manual_seed(107);
    REQUIRE_GRADCHECK([](const auto& v) { return sqrt(v[0]); }, positive_leaf({2, 3}));
}

TEST_CASE("gradcheck rsqrt", "[gradcheck][math]") {
    manual_seed(108);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0].rsqrt(); }, positive_leaf({2, 3}));
}

TEST_CASE("gradcheck var - dims and keepdim and unbiased", "[gradcheck][math]") {
    manual_seed(109);
    Tensor x = leaf({3, 4, 2});
    for (int dim : {0, 1, -1})
        for (bool keepdim : {false, true})
            for (bool unbiased : {true, false}) {
                INFO("dim " << dim << " keepdim " << keepdim << " unbiased " << unbiased);
                REQUIRE_GRADCHECK([=](const auto& v) { return var(v[0], dim, keepdim, unbiased); }, x);
            }
}

// ==== abs / clamp / minimum / maximum (away from kinks and ties, which are not differentiable) ======

TEST_CASE("gradcheck abs", "[gradcheck][math]") {
    Tensor x({{-1.5, 0.3, 2.0}, {-0.2, 0.7, -3.0}}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return abs(v[0]); }, x);
}

TEST_CASE("gradcheck clamp - both bounds, one bound", "[gradcheck][math]") {
    Tensor x({{-1.5, 0.3, 2.0}, {-0.2, 0.7, -3.0}}, true);  // none within 1e-6 of a bound
    REQUIRE_GRADCHECK([](const auto& v) { return clamp(v[0], -1.0, 1.0); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return clamp_min(v[0], 0.0); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return clamp_max(v[0], 0.5); }, x);
}

TEST_CASE("gradcheck minimum and maximum - broadcast", "[gradcheck][math]") {
    manual_seed(110);
    Tensor a = leaf({3, 4}), b = leaf({4}), c = leaf({3, 1});  // normal values: no ties
    REQUIRE_GRADCHECK([](const auto& v) { return maximum(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return minimum(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return maximum(v[0], v[1]); }, c, b);
    REQUIRE_GRADCHECK([](const auto& v) { return minimum(v[0], v[1]); }, c, a);
}
