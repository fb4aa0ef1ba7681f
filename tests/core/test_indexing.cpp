// tests/core/test_indexing.cpp — index_select and one_hot of core/indexing.cpp (float32): the
// gather, the backward's row scatter-add (duplicates sum), one_hot(ids, V) @ E as the oracle of
// index_select, and IDs out of range. Gradchecks: gradcheck_indexing.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmanipulation.hpp>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/detail/permute.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// ==== indexing =================================================================================================

TEST_CASE("index_select gathers rows - backward scatter-adds - duplicates sum - untouched rows stay 0", "[ops][index]") {
    Tensor E({{1, 2}, {3, 4}, {5, 6}, {7, 8}}, true);  // (V=4, d=2)
    IndexTensor ids{2, 0, 2};
    Tensor y = index_select(E, 0, ids);
    require_values(y, {{5, 6}, {1, 2}, {5, 6}});
    y.backward(Tensor({{1, 1}, {2, 2}, {10, 10}}));
    require_values(E.grad(), {{2, 2}, {0, 0}, {11, 11}, {0, 0}});
    REQUIRE(E.grad().at({1, 0}) == 0.0f);
    REQUIRE(E.grad().at({3, 1}) == 0.0f);

    // A second backward adds into the same rows.
    index_select(E, 0, IndexTensor{3}).sum().backward();
    require_values(E.grad(), {{2, 2}, {0, 0}, {11, 11}, {1, 1}});
}

TEST_CASE("index_select with 2-D ids - and from a non-leaf source", "[ops][index]") {
    Tensor E({{1, 2}, {3, 4}, {5, 6}}, true);
    Tensor y = index_select(E * 10, 0, IndexTensor{{0, 1}, {1, 1}});  // (2, 2, d=2)
    require_values(y, {{{10, 20}, {30, 40}}, {{30, 40}, {30, 40}}});
    y.sum().backward();
    require_values(E.grad(), {{10, 10}, {30, 30}, {0, 0}});

    Tensor v({5, 6, 7}, true);  // 1-D source: rows are scalars
    Tensor picked = index_select(v, -1, IndexTensor{2, 2, 0});
    require_values(picked, {7, 7, 5});
    picked.backward(Tensor({1, 2, 4}));
    require_values(v.grad(), {4, 0, 3});
}

TEST_CASE("one_hot(ids V) @ E equals index_select(E 0 ids) in value and in dL/dE", "[ops][index]") {
    manual_seed(3);
    const Tensor E0 = randn({5, 3});
    const Tensor G = randn({4, 3});
    const IndexTensor ids{4, 1, 4, 0};

    Tensor oh = one_hot(ids, 5);
    REQUIRE(oh.shape() == Shape{4, 5});
    REQUIRE_FALSE(oh.requires_grad());
    require_values(oh, {{0, 0, 0, 0, 1}, {0, 1, 0, 0, 0}, {0, 0, 0, 0, 1}, {1, 0, 0, 0, 0}});

    Tensor Ea = E0.detach().requires_grad_();
    Tensor Eb = E0.detach().requires_grad_();
    Tensor ya = matmul(oh, Ea);
    Tensor yb = index_select(Eb, 0, ids);
    require_values(ya, yb, 1e-6);
    ya.backward(G);
    yb.backward(G);
    require_values(Ea.grad(), Eb.grad(), 1e-6);
    for (std::int64_t j = 0; j < 3; ++j) {
        REQUIRE(Eb.grad().at({2, j}) == 0.0f);  // row 2 was never selected
        REQUIRE(Eb.grad().at({3, j}) == 0.0f);
        REQUIRE(Eb.grad().at({4, j}) == Approx(G.at({0, j}) + G.at({2, j})));
    }
}

TEST_CASE("index_select with an ID out of range or negative throws IndexError with value and range", "[ops][errors][index]") {
    Tensor E = ones({4, 2});
    REQUIRE_THROWS_AS(index_select(E, 0, IndexTensor{0, 4}), IndexError);
    REQUIRE_THROWS_AS(index_select(E, 0, IndexTensor{0, 4}), std::out_of_range);
    REQUIRE_THROWS_WITH(index_select(E, 0, IndexTensor{0, 4}),
                        Contains("index_select") && Contains("index 4") && Contains("[0, 4)"));
    REQUIRE_THROWS_WITH(index_select(E, 0, IndexTensor{{0, 1}, {-1, 2}}),
                        Contains("index_select") && Contains("index -1") && Contains("(1, 0)") &&
                            Contains("[0, 4)"));
    REQUIRE_THROWS_WITH(index_select(E, 1, IndexTensor{0}), Contains("index_select") && Contains("dim 0"));
    REQUIRE_THROWS_WITH(one_hot(IndexTensor{5}, 5), Contains("one_hot") && Contains("index 5") && Contains("[0, 5)"));
}
