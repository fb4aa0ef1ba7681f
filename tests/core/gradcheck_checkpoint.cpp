// tests/core/gradcheck_checkpoint.cpp — xgrad::checkpoint against finite differences.
//
// Built against xgrad_f64 (real = double), as every gradcheck. The checkpointed function reads two
// inputs through its arguments and a weight it captured (found by the recorder), so both ways a
// gradient leaves the checkpoint node are checked.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/checkpoint.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck checkpoint - inputs and a captured weight", "[gradcheck][checkpoint]") {
    manual_seed(21);
    Tensor a = leaf({2, 3}), b = leaf({2, 4}), W = leaf({3, 4});
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            const Tensor weight = v[2];
            return checkpoint([weight](const Tensor& p, const Tensor& q) { return matmul(p, weight).tanh() * q; },
                              v[0], v[1]);
        },
        a, b, W);
}

TEST_CASE("gradcheck checkpoint - nested", "[gradcheck][checkpoint]") {
    manual_seed(22);
    Tensor a = leaf({3, 3}), W = leaf({3, 3});
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            const Tensor weight = v[1];
            auto inner = [weight](const Tensor& u) { return matmul(u, weight).sigmoid(); };
            return checkpoint([inner](const Tensor& u) { return checkpoint(inner, u * u) + u; }, v[0]);
        },
        a, W);
}
