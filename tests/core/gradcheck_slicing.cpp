// tests/core/gradcheck_slicing.cpp — narrow, split and chunk against finite differences, each on its
// own, so that a composite cannot hide a wrong backward.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_slicing && build/tests/gradcheck_slicing`.
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

// ==== slicing ======================================================================================

TEST_CASE("gradcheck narrow - every dim and a negative start", "[gradcheck][slicing]") {
    manual_seed(101);
    Tensor x = leaf({3, 4, 5});
    REQUIRE_GRADCHECK([](const auto& v) { return narrow(v[0], 0, 1, 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return narrow(v[0], 1, 0, 3); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return narrow(v[0], -1, -3, 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0].narrow(2, 4, 1); }, x);
}

TEST_CASE("gradcheck split - uneven last piece", "[gradcheck][slicing]") {
    manual_seed(102);
    Tensor x = leaf({2, 7});
    // Each piece weighted differently (through the product with its own index), so a gradient
    // landing in the wrong slice is caught.
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            std::vector<Tensor> p = split(v[0], 3, -1);  // widths 3, 3, 1
            REQUIRE(p.size() == 3);
            return concat({p[0] * 2, p[1] * p[1], p[2].exp()}, 1);
        },
        x);
}

TEST_CASE("gradcheck chunk - fewer pieces than asked", "[gradcheck][slicing]") {
    manual_seed(103);
    Tensor x = leaf({6, 3});
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            std::vector<Tensor> p = chunk(v[0], 4, 0);  // 6 rows in 4 chunks: 2, 2, 2 (as torch.chunk)
            REQUIRE(p.size() == 3);
            return p[0] * 3 + p[1].tanh() + p[2] * p[2];
        },
        x);
}
