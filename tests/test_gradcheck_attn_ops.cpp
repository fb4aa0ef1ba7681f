// tests/test_gradcheck_attn_ops.cpp — the attention chapter's core ops against finite differences.
//
// Built against xgrad_f64 (real = double; see core/gradcheck.hpp). One gradcheck per op on its
// own (narrow, split, chunk, masked_fill, tril, triu, sqrt, rsqrt, var), so that a composite
// cannot hide a wrong backward, plus a mutation test: a masked_fill whose backward forgets to
// zero the filled positions must be rejected.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include <xtensor/xoperation.hpp>

#include "core/autograd.hpp"
#include "core/gradcheck.hpp"
#include "core/ops.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

namespace {
// A leaf with U[lo, lo + 1) values, for sqrt and rsqrt (their derivatives blow up at 0).
Tensor positive_leaf(const Shape& shape, real lo = 0.5) { return (rand(shape) + lo).detach().requires_grad_(); }
}  // namespace

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
