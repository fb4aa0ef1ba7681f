// tests/core/gradcheck_masked_matmul.cpp — masked_matmul and sampled_matmul against finite
// differences, batched, with a broadcast keep and a fully hidden row.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_masked_matmul && build/tests/gradcheck_masked_matmul`.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck masked_matmul - batched, keep broadcast, a fully hidden row", "[gradcheck][masked_matmul]") {
    manual_seed(201);
    Tensor a = leaf({2, 3, 4}), b = leaf({2, 4, 2});
    const Tensor keep({{1, 0, 1, 1}, {0, 0, 0, 0}, {1, 1, 0, 1}});  // (M, K): row 1 keeps nothing
    REQUIRE_GRADCHECK([keep](const std::vector<Tensor>& in) { return masked_matmul(in[0], in[1], keep); }, a, b);
}

TEST_CASE("gradcheck sampled_matmul - batched, keep broadcast, a fully hidden row", "[gradcheck][masked_matmul]") {
    manual_seed(202);
    Tensor a = leaf({2, 3, 4}), b = leaf({2, 4, 5});
    const Tensor keep({{{1, 0, 1, 1, 0}, {0, 0, 0, 0, 0}, {1, 1, 0, 1, 1}}, {{0, 1, 1, 0, 1}, {1, 0, 0, 0, 0}, {1, 1, 1, 1, 1}}});
    REQUIRE_GRADCHECK([keep](const std::vector<Tensor>& in) { return sampled_matmul(in[0], in[1], keep); }, a, b);
}
