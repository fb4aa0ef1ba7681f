// tests/core/gradcheck_softmax.cpp — softmax, log_softmax and the oracle softmax_composed along each
// dim, and softmax with a -inf mask, against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_softmax && build/tests/gradcheck_softmax`.
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

// ==== softmax family ========================================================================================

TEST_CASE("gradcheck softmax and log_softmax along each dim", "[gradcheck][softmax]") {
    manual_seed(13);
    Tensor x = leaf({2, 3, 4});
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax(v[0], d); }, x);
        REQUIRE_GRADCHECK([d](const auto& v) { return log_softmax(v[0], d); }, x);
    }
    // Large logits: the max subtraction keeps everything finite.
    Tensor big = (randn({2, 5}) * 3 + 1000).detach().requires_grad_();
    REQUIRE_GRADCHECK([](const auto& v) { return softmax(v[0], 1); }, big);
    REQUIRE_GRADCHECK([](const auto& v) { return log_softmax(v[0], 1); }, big);
}

TEST_CASE("gradcheck softmax_composed (the fused softmax's oracle) along each dim", "[gradcheck][softmax]") {
    manual_seed(15);
    Tensor x = leaf({2, 3, 11});  // rows of 11: two SIMD registers of 4 doubles and a tail
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax(v[0], d); }, x);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax_composed(v[0], d); }, x);
    }
}

TEST_CASE("gradcheck softmax with a -inf mask", "[gradcheck][softmax]") {
    manual_seed(14);
    Tensor x = leaf({2, 4});
    const real inf = std::numeric_limits<real>::infinity();
    Tensor mask({{0, -inf, 0, 0}, {0, 0, -inf, -inf}});
    REQUIRE_GRADCHECK([mask](const auto& v) { return softmax(v[0] + mask, 1); }, x);
    // Only the unmasked log-probabilities, gathered by position: finite everywhere.
    REQUIRE_GRADCHECK(
        [mask](const auto& v) {
            return index_select(log_softmax(v[0] + mask, 1).reshape({-1}), 0, IndexTensor{0, 2, 3, 4, 5});
        },
        x);
}
