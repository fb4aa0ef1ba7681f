// tests/core/test_selection.cpp — where, gather, scatter_add, topk, sort and argsort of
// core/selection.cpp (float32): by hand and against PyTorch (tests/reference/core_ops_reference.hpp,
// written by make_core_ops_reference.py), broadcasting, negative dims, ties, NaN, and every error
// by its message. Gradchecks: gradcheck_selection.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// An IndexTensor's values as a real Tensor, to compare with a reference written in double.
static Tensor as_real(const IndexTensor& t) {
    Array a(array_shape(t.data()));
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(t.data().data()[i]);
    return from_array(std::move(a));
}

// The reference (values in double) as an IndexTensor.
static IndexTensor index_ref(const std::string& name) {
    Tensor t = torch_ref(name);
    IndexArray a(array_shape(t.data()));
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<std::int64_t>(t.data().data()[i]);
    return IndexTensor(std::move(a));
}

// NaN-aware: the same shape, NaN where the reference has NaN, the values elsewhere.
static void require_values_nan(const Tensor& t, const Tensor& expected) {
    REQUIRE(t.shape() == expected.shape());
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        INFO("flat element " << i);
        const real e = expected.data().data()[i], v = t.data().data()[i];
        if (std::isnan(e)) REQUIRE(std::isnan(v));
        else REQUIRE(v == Approx(e).margin(1e-5));
    }
}

// ==== where ==========================================================================================

TEST_CASE("where - by hand and broadcast against PyTorch", "[selection][torch]") {
    // cond (2, 2) picks x where 1 and y where 0; y (2,) is broadcast over the rows
    Tensor x({{1, 2}, {3, 4}}, true), y({10, 20}, true);
    Tensor out = where(Tensor({{1, 0}, {0, 1}}), x, y);
    require_values(out, {{1, 20}, {10, 4}});
    weighted_sum(out, Tensor({{1, 2}, {3, 4}})).backward();
    require_values(x.grad(), {{1, 0}, {0, 4}});
    require_values(y.grad(), {3, 2});  // y[0] fed (1, 0) with weight 3, y[1] fed (0, 1) with weight 2

    Tensor xr = torch_ref("where.x", true), yr = torch_ref("where.y", true);  // (3, 4) and (4,)
    Tensor o = where(torch_ref("where.cond"), xr, yr);                       // cond (3, 1)
    require_values(o, torch_ref("where.out"));
    weighted_sum(o, torch_ref("where.w")).backward();
    require_values(xr.grad(), torch_ref("where.dx"));
    require_values(yr.grad(), torch_ref("where.dy"));
}

TEST_CASE("where - a mask from a comparison, and an infinite gradient stays out of the other branch", "[selection]") {
    Tensor x({-1, 2, -3}, true);
    Tensor out = where(gt(x, 0.0), x, zeros({3}));  // relu by a mask
    require_values(out, {0, 2, 0});
    out.backward(Tensor({kInf, 1, kInf}));
    require_values(x.grad(), {0, 1, 0});  // g·0 would give NaN at the masked entries
}

TEST_CASE("where - errors name the op", "[selection]") {
    Tensor x = zeros({2, 3});
    REQUIRE_THROWS_WITH(where(Tensor({1, 0.5, 0}), x, x), Contains("where: cond must be a 0/1 mask; got 0.5 at flat position 1"));
    REQUIRE_THROWS_WITH(where(Tensor({1, kNaN, 0}), x, x), Contains("where: cond must be a 0/1 mask; got nan"));
    REQUIRE_THROWS_WITH(where(ones({2}), x, x), Contains("where: shapes (2) and (2, 3) cannot be broadcast"));
    REQUIRE_THROWS_WITH(where(ones({2, 3}), x, zeros({4})), Contains("where: shapes (2, 3) and (4) cannot be broadcast"));
    REQUIRE_THROWS_AS(where(ones({1}), zeros({2}), zeros({3})), ValueError);
}

// ==== gather / scatter_add ===========================================================================

TEST_CASE("gather - by hand, and dims 1 and -2 against PyTorch", "[selection][torch]") {
    // dim 1: out[i][j] = x[i][index[i][j]]; the repeated index 2 sums its gradients
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor out = gather(x, 1, IndexTensor{{2, 2}, {0, 1}});
    require_values(out, {{3, 3}, {4, 5}});
    weighted_sum(out, Tensor({{1, 10}, {100, 1000}})).backward();
    require_values(x.grad(), {{0, 0, 11}, {100, 1000, 0}});
    require_values(gather(x, 0, IndexTensor{{1, 0, 1}}), {{4, 2, 6}});  // dim 0: out[i][j] = x[index[i][j]][j]
    REQUIRE(gather(Tensor(5.0), 0, IndexTensor(IndexArray(ArrayShape{}, 0))).item() == 5);  // 0-d, as torch

    Tensor xr = torch_ref("gather.x", true);
    for (const auto& [tag, dim] : {std::pair{"1", 1}, std::pair{"0", -2}}) {
        INFO("dim " << dim);
        xr.reset_grad();
        Tensor y = gather(xr, dim, index_ref(std::string("gather.index") + tag));
        require_values(y, torch_ref(std::string("gather.y_") + tag));
        weighted_sum(y, torch_ref(std::string("gather.w_") + tag)).backward();
        require_values(xr.grad(), torch_ref(std::string("gather.dx_") + tag));
    }
}

TEST_CASE("scatter_add - by hand, against PyTorch, and a src larger than index", "[selection][torch]") {
    // out = input; out[index[i][j]][j] += src[i][j] along dim 0; two adds land on (0, 0)
    Tensor input = zeros({2, 2}, true), src({{1, 2}, {3, 4}}, true);
    Tensor out = scatter_add(input, 0, IndexTensor{{0, 1}, {0, 0}}, src);
    require_values(out, {{4, 4}, {0, 2}});
    weighted_sum(out, Tensor({{1, 2}, {3, 4}})).backward();
    require_values(input.grad(), {{1, 2}, {3, 4}});
    require_values(src.grad(), {{1, 4}, {1, 2}});  // gather(g, 0, index)

    Tensor xr = torch_ref("gather.x", true), sr = torch_ref("scatter_add.src", true);  // (3, 4), src (3, 5)
    Tensor y = scatter_add(xr, 0, index_ref("gather.index0"), sr);                     // index (2, 4)
    require_values(y, torch_ref("scatter_add.y"));
    weighted_sum(y, torch_ref("scatter_add.w")).backward();
    require_values(xr.grad(), torch_ref("scatter_add.dx"));
    require_values(sr.grad(), torch_ref("scatter_add.dsrc"));  // 0 outside index's (2, 4) corner
}

TEST_CASE("gather and scatter_add - errors name the op, the index and the range", "[selection]") {
    Tensor x = zeros({2, 3});
    REQUIRE_THROWS_WITH(gather(x, 1, IndexTensor{{0, 3}}), Contains("gather: index 3 at position (0, 1) out of range [0, 3)"));
    REQUIRE_THROWS_AS(gather(x, 1, IndexTensor{{-1}}), IndexError);  // never wrapped
    REQUIRE_THROWS_WITH(gather(x, 2, IndexTensor{{0}}), Contains("gather: dim 2 out of range [-2, 2)"));
    REQUIRE_THROWS_WITH(gather(x, 0, IndexTensor{0, 1}), Contains("gather: index has 1 dims, input has 2"));
    REQUIRE_THROWS_WITH(gather(x, 0, IndexTensor{{0, 0, 0, 0}}), Contains("gather: index (1, 4) is larger than input (2, 3) at dim 1"));
    REQUIRE_THROWS_WITH(scatter_add(x, 0, IndexTensor{{2}}, ones({1, 1})),
                        Contains("scatter_add: index 2 at position (0, 0) out of range [0, 2)"));
    REQUIRE_THROWS_WITH(scatter_add(x, 0, IndexTensor{{0, 1}}, ones({1, 1})),
                        Contains("scatter_add: index (1, 2) is larger than src (1, 1) at dim 1"));
    REQUIRE_THROWS_WITH(scatter_add(x, -3, IndexTensor{{0}}, ones({1, 1})), Contains("scatter_add: dim -3 out of range [-2, 2)"));
    REQUIRE_THROWS_WITH(scatter_add(x, 0, IndexTensor{{0}}, ones({1})), Contains("scatter_add: index has 2 dims, src has 1"));
}

// ==== topk / sort / argsort ==========================================================================

TEST_CASE("topk - against PyTorch, largest and smallest, with their gradients", "[selection][torch]") {
    Tensor x = torch_ref("order.topk_x", true);  // (3, 5), no ties
    for (bool largest : {true, false}) {
        const std::string tag = largest ? "largest" : "smallest";
        INFO(tag);
        x.reset_grad();
        auto [values, indices] = topk(x, 3, -1, largest);
        require_values(values, torch_ref("order.topk_" + tag + "_values"));
        require_values(as_real(indices), torch_ref("order.topk_" + tag + "_indices"));
        weighted_sum(values, torch_ref("order.topk_w")).backward();
        require_values(x.grad(), torch_ref("order.topk_" + tag + "_dx"));
    }
}

TEST_CASE("topk - ties lower index first, NaN largest, dim 0, k = 0 and k = n", "[selection]") {
    Tensor x({3, 1, 3, kNaN, 1});
    auto [v, i] = topk(x, 3);
    REQUIRE(std::isnan(v.data()(0)));
    REQUIRE(equal(i, IndexTensor{3, 0, 2}));  // NaN, then the two 3s in their order
    REQUIRE(equal(topk(x, 2, 0, /*largest=*/false).indices, IndexTensor{1, 4}));
    REQUIRE(topk(x, 0).values.shape() == Shape{0});
    REQUIRE(equal(topk(x, 5, -1, false).indices, IndexTensor{1, 4, 0, 2, 3}));
    // dim 0 of (3, 2): the 2 largest of each column
    auto [cv, ci] = topk(Tensor({{1, 6}, {5, 2}, {3, 4}}), 2, 0);
    require_values(cv, {{5, 6}, {3, 4}});
    REQUIRE(equal(ci, IndexTensor{{1, 0}, {2, 2}}));
    Tensor s = Tensor(2.5);
    REQUIRE(topk(s, 1).values.item() == 2.5f);  // a 0-d tensor is one element
}

TEST_CASE("topk - errors name the op and the range of k", "[selection]") {
    Tensor x = zeros({2, 3});
    REQUIRE_THROWS_WITH(topk(x, 4), Contains("topk: k 4 out of range [0, 3] for dim -1 of shape (2, 3)"));
    REQUIRE_THROWS_WITH(topk(x, -1, 0), Contains("topk: k -1 out of range [0, 2] for dim 0"));
    REQUIRE_THROWS_WITH(topk(x, 1, 2), Contains("topk: dim 2 out of range [-2, 2)"));
    REQUIRE_THROWS_WITH(topk(Tensor(1.0), 0), Contains("topk: k 0 for a 0-d tensor"));
}

TEST_CASE("sort and argsort - stable, NaN last ascending and first descending, as PyTorch", "[selection][torch]") {
    Tensor x = torch_ref("order.sort_x");  // (3, 5) with ties and a NaN
    for (bool descending : {false, true}) {
        for (int dim : {1, 0}) {
            const std::string tag = std::string(descending ? "descending_" : "ascending_") + std::to_string(dim);
            INFO(tag);
            const int d = dim == 1 ? -1 : 0;  // dim 1 asked as -1
            auto [values, indices] = sort(x, d, descending);
            require_values_nan(values, torch_ref("order.sort_" + tag + "_values"));
            REQUIRE(equal(indices, index_ref("order.sort_" + tag + "_indices")));
            REQUIRE(equal(argsort(x, d, descending), indices));
        }
    }
}

TEST_CASE("sort - the gradient goes back to where each value came from", "[selection]") {
    Tensor x({{3, 1, 2}}, true);
    auto [values, indices] = sort(x);
    require_values(values, {{1, 2, 3}});
    weighted_sum(values, Tensor({{10, 20, 30}})).backward();
    require_values(x.grad(), {{30, 10, 20}});
    REQUIRE_THROWS_WITH(sort(x, 2), Contains("sort: dim 2 out of range [-2, 2)"));
    REQUIRE_THROWS_WITH(argsort(x, -3), Contains("argsort: dim -3 out of range [-2, 2)"));
}
