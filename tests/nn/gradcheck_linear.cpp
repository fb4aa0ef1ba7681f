// tests/nn/gradcheck_linear.cpp — functional::linear with and without bias, on 1-D, 2-D and
// (B, T, in) inputs, against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_linear && build/tests/gradcheck_linear`.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <type_traits>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== linear ==========================================================================================

TEST_CASE("gradcheck linear: x - W and b - without bias - (BxTxin) input", "[gradcheck][nn][linear]") {
    manual_seed(1);
    Tensor x = leaf({4, 3}), W = leaf({5, 3}), b = leaf({5});
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, x, W, b);
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1]); }, x, W);
    Tensor x3 = leaf({2, 3, 4}), W3 = leaf({5, 4}), b3 = leaf({5});
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, x3, W3, b3);
    // Only some inputs require grad: x is data, W and b are parameters.
    Tensor data = randn({6, 3});
    REQUIRE_GRADCHECK([data](const auto& v) { return F::linear(data, v[0], v[1]); }, W, b);
    // A 1-D input (in,) → (out,).
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, leaf({3}), W, b);
}
