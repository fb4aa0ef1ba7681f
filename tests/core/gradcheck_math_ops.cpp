// tests/core/gradcheck_math_ops.cpp — sqrt, rsqrt and var (dims, keepdim, unbiased) against finite
// differences.
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
