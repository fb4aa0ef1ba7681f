// tests/core/gradcheck_selection.cpp — where (broadcast), gather and scatter_add (dims, negative
// dims, repeated indices, a src larger than index), topk and sort (both orders, dims) against
// finite differences. Inputs are random normal values, so topk's and sort's choices have no ties
// (a tie is not differentiable).
//
// Built against xgrad_f64 (real = double), its own executable: `cmake --build build --target
// gradcheck_selection && build/tests/gradcheck_selection`.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck where - cond, x and y broadcast", "[gradcheck][selection]") {
    manual_seed(301);
    Tensor cond({{1}, {0}, {1}});  // (3, 1)
    Tensor x = leaf({3, 4}), y = leaf({4});
    REQUIRE_GRADCHECK([cond](const auto& v) { return where(cond, v[0], v[1]); }, x, y);
    Tensor c2({{1, 0, 0, 1}});  // (1, 4), x (2, 1, 4), y (3, 1): out (2, 3, 4)
    REQUIRE_GRADCHECK([c2](const auto& v) { return where(c2, v[0], v[1]); }, leaf({2, 1, 4}), leaf({3, 1}));
}

TEST_CASE("gradcheck gather - dims, negative dims, repeated indices", "[gradcheck][selection]") {
    manual_seed(302);
    Tensor x = leaf({3, 4});
    IndexTensor i1{{0, 3, 3}, {2, 1, 0}};                 // (2, 3), along dim 1
    IndexTensor i0{{2, 0, 1, 2}, {0, 0, 2, 1}};           // (2, 4), along dim 0
    REQUIRE_GRADCHECK([i1](const auto& v) { return gather(v[0], 1, i1); }, x);
    REQUIRE_GRADCHECK([i1](const auto& v) { return gather(v[0], -1, i1); }, x);
    REQUIRE_GRADCHECK([i0](const auto& v) { return gather(v[0], -2, i0); }, x);
    IndexTensor i3{{{1}, {0}}, {{1}, {1}}};               // (2, 2, 1) into (2, 3, 2), along dim 1
    REQUIRE_GRADCHECK([i3](const auto& v) { return gather(v[0], 1, i3); }, leaf({2, 3, 2}));
}

TEST_CASE("gradcheck scatter_add - input and src, a src larger than index", "[gradcheck][selection]") {
    manual_seed(303);
    IndexTensor i0{{2, 0, 1, 2}, {0, 0, 2, 1}};  // (2, 4): repeated targets sum
    REQUIRE_GRADCHECK([i0](const auto& v) { return scatter_add(v[0], 0, i0, v[1]); }, leaf({3, 4}), leaf({2, 4}));
    REQUIRE_GRADCHECK([i0](const auto& v) { return scatter_add(v[0], -2, i0, v[1]); }, leaf({3, 4}), leaf({3, 5}));
    IndexTensor i1{{0, 0}, {1, 0}, {2, 2}};      // (3, 2) along dim 1 of (3, 3)
    REQUIRE_GRADCHECK([i1](const auto& v) { return scatter_add(v[0], 1, i1, v[1]); }, leaf({3, 3}), leaf({3, 2}));
}

TEST_CASE("gradcheck topk - largest and smallest, dims", "[gradcheck][selection]") {
    manual_seed(304);
    Tensor x = leaf({3, 5});
    for (bool largest : {true, false}) {
        INFO("largest " << largest);
        REQUIRE_GRADCHECK([largest](const auto& v) { return topk(v[0], 2, -1, largest).values; }, x);
        REQUIRE_GRADCHECK([largest](const auto& v) { return topk(v[0], 3, 0, largest).values; }, x);
    }
}

TEST_CASE("gradcheck sort - ascending and descending, dims", "[gradcheck][selection]") {
    manual_seed(305);
    Tensor x = leaf({2, 3, 4});
    for (bool descending : {false, true})
        for (int dim : {0, 1, -1}) {
            INFO("descending " << descending << " dim " << dim);
            REQUIRE_GRADCHECK([=](const auto& v) { return sort(v[0], dim, descending).values; }, x);
        }
}
