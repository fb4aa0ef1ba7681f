// tests/core/gradcheck_indexing.cpp — index_select with duplicate IDs (from a leaf and a non-leaf)
// and one_hot(ids, V) @ E, the embedding's reference path, against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_indexing && build/tests/gradcheck_indexing`.
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

// ==== indexing ===============================================================================================

TEST_CASE("gradcheck index_select with duplicate IDs - from a leaf and from a non-leaf", "[gradcheck][index]") {
    manual_seed(15);
    Tensor E = leaf({5, 3});
    const IndexTensor ids{{4, 0, 4}, {1, 4, 0}};
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0], 0, ids); }, E);       // leaf: direct scatter
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0] * 2, 0, ids); }, E);   // non-leaf
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0], 0, ids).tanh() + v[0].sum(); }, E);
    Tensor v1 = leaf({6});
    REQUIRE_GRADCHECK([](const auto& v) { return index_select(v[0], 0, IndexTensor{5, 5, 2}); }, v1);
}

TEST_CASE("gradcheck one_hot(ids) @ E - the embedding reference path", "[gradcheck][index]") {
    manual_seed(16);
    const IndexTensor ids{3, 3, 0, 1};
    REQUIRE_GRADCHECK([ids](const auto& v) { return matmul(one_hot(ids, 4), v[0]); }, leaf({4, 2}));
}
