// tests/core/gradcheck_matmul.cpp — matmul (2-D, transposed operands, batched and broadcast) against
// finite differences; a backward with a transposed-operand mistake must fail.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_matmul && build/tests/gradcheck_matmul`.
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

// ==== matmul ==============================================================================================

TEST_CASE("gradcheck matmul 2-D - including transposed operands", "[gradcheck][matmul]") {
    manual_seed(11);
    Tensor a = leaf({3, 4}), b = leaf({4, 2});
    Tensor at = leaf({4, 3}), bt = leaf({2, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(0, 1), v[1]); }, at, b);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1].transpose(0, 1)); }, a, bt);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(0, 1), v[1].transpose(0, 1)); }, at, bt);
}

TEST_CASE("gradcheck matmul batched and broadcast", "[gradcheck][matmul]") {
    manual_seed(12);
    SECTION("(B,n,k) @ (B,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({3, 4, 2}));
    }
    SECTION("(B,n,k) @ (k,m): the right operand shared by every batch") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({4, 5}));
    }
    SECTION("(n,k) @ (B,k,m): the left operand shared by every batch") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({2, 4}), leaf({3, 4, 5}));
    }
    SECTION("(1,n,k) @ (B,k,m) and (B,n,k) @ (1,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({1, 2, 4}), leaf({3, 4, 2}));
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({1, 4, 2}));
    }
    SECTION("4-D (2,1,n,k) @ (3,k,m) broadcasts to (2,3,n,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({2, 1, 2, 3}), leaf({3, 3, 2}));
    }
    SECTION("transposed batches: (B,k,n)ᵀ @ (B,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(1, 2), v[1]); }, leaf({2, 4, 3}),
                          leaf({2, 4, 2}));
    }
}

TEST_CASE("mutation: a matmul backward with a transposed-operand mistake fails", "[gradcheck][mutation]") {
    manual_seed(20);
    Tensor a = leaf({3, 3}), b = leaf({3, 3});
    // dA should be G Bᵀ; this uses G B.
    auto bad_matmul = [](const std::vector<Tensor>& v) {
        Tensor y = matmul(v[0].detach(), v[1].detach());
        return make_result(y.data(), "bad_matmul", {v[0], v[1]},
                           [A = v[0].data(), B = v[1].data()](const Array& g, const Array&) {
                               Tensor G = from_array(g);
                               Array dA = matmul(G, from_array(B)).data();
                               Array dB = matmul(from_array(A).transpose(0, 1), G).data();
                               return Grads{dA, dB};
                           });
    };
    GradcheckResult r = gradcheck(bad_matmul, {a, b});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Contains("input 0"));
}
