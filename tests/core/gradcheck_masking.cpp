// tests/core/gradcheck_masking.cpp — masked_fill (broadcast mask, -inf), tril and triu against finite
// differences; a masked_fill whose backward passes gradient to filled positions must fail.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_masking && build/tests/gradcheck_masking`.
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

// ==== masking ======================================================================================

TEST_CASE("gradcheck masked_fill - broadcast mask and -inf", "[gradcheck][masking]") {
    manual_seed(104);
    Tensor x = leaf({2, 3, 4});
    Tensor causal = triu(ones({3, 4}), 1);  // broadcast over the leading 2
    Tensor rows = Tensor({{{1.0, 0, 0, 1}}, {{0, 2.0, 0, 0}}});  // (2, 1, 4), nonzero 2 means True too
    REQUIRE_GRADCHECK([&](const auto& v) { return masked_fill(v[0], rows, 0.5); }, x);
    // The attention pattern: -inf, then softmax (masked entries get weight 0 and gradient 0).
    const real inf = std::numeric_limits<real>::infinity();
    REQUIRE_GRADCHECK([&](const auto& v) { return softmax(v[0].masked_fill(causal, -inf), -1); }, x);
}

TEST_CASE("mutation: a masked_fill backward that passes gradient to filled positions fails",
          "[gradcheck][mutation]") {
    manual_seed(105);
    Tensor x = leaf({3, 4});
    Tensor mask = triu(ones({3, 4}), 1);
    // Forward right, backward wrong: dL/dx = g everywhere (the filled entries should get 0).
    auto bad = [&](const std::vector<Tensor>& v) {
        Tensor y = masked_fill(v[0].detach(), mask, 2.0);
        return make_result(y.data(), "bad_masked_fill", {v[0]},
                           [](const Array& g, const Array&) { return make_grads(Array(g)); });
    };
    GradcheckResult r = gradcheck(bad, {x});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Contains("analytic") && Contains("numeric"));
    // The real op passes on the same input.
    REQUIRE_GRADCHECK([&](const auto& v) { return masked_fill(v[0], mask, 2.0); }, x);
}

TEST_CASE("gradcheck tril and triu - offsets and batch dims", "[gradcheck][masking]") {
    manual_seed(106);
    Tensor x = leaf({2, 3, 4});
    for (std::int64_t k : {-1, 0, 2}) {
        INFO("k = " << k);
        REQUIRE_GRADCHECK([k](const auto& v) { return tril(v[0], k); }, x);
        REQUIRE_GRADCHECK([k](const auto& v) { return v[0].triu(k); }, x);
    }
}
