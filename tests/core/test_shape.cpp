// tests/core/test_shape.cpp — reshape, transpose, permute, concat and stack of core/shape.cpp, and the
// row-copy kernel permute_array of core/permute.cpp (float32): values, the gradients routed back,
// and the errors of wrong sizes and orders. Gradchecks: gradcheck_shape.cpp.
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

// ==== shape ==============================================================================================

TEST_CASE("reshape with -1 infers the size - its gradient is reshaped back", "[ops][shape]") {
    Tensor x = arange(6);
    x.requires_grad_();
    Tensor y = x.reshape({-1, 2});
    require_values(y, {{0, 1}, {2, 3}, {4, 5}});
    REQUIRE(x.reshape({2, -1}).shape() == Shape{2, 3});
    REQUIRE(x.view({1, -1, 1}).shape() == Shape{1, 6, 1});
    Tensor s = Tensor({7}).reshape({});  // one element to a 0-d scalar
    REQUIRE(s.shape() == Shape{});
    REQUIRE(s.item() == 7.0f);
    y.backward(Tensor({{1, 2}, {3, 4}, {5, 6}}));
    require_values(x.grad(), {1, 2, 3, 4, 5, 6});
}

// A tensor with no elements reshapes to any shape of no elements, and its gradient is reshaped back
// (the signed reshape of xtensor divides by the product of the sizes: 0).
TEST_CASE("reshape and view of a zero-size tensor - the gradient has the input's shape", "[ops][shape][regression]") {
    Tensor x = zeros({2, 0, 8}, true);
    Tensor y = x.reshape({2, 0, 2, 4});
    REQUIRE(y.shape() == Shape{2, 0, 2, 4});
    y.sum().backward();
    REQUIRE(x.grad().shape() == Shape{2, 0, 8});
    Tensor z = zeros({0, 3}, true);
    Tensor w = z.view({3, 0, 1});
    REQUIRE(w.shape() == Shape{3, 0, 1});
    w.backward(zeros({3, 0, 1}));
    REQUIRE(z.grad().shape() == Shape{0, 3});
    // -1 cannot be inferred beside a 0: every size fits (PyTorch refuses it too)
    REQUIRE_THROWS_WITH(x.reshape({0, -1}), Contains("cannot infer -1"));
}

TEST_CASE("transpose swaps two dims - its gradient is transposed back", "[ops][shape]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor y = x.transpose(0, 1);
    require_values(y, {{1, 4}, {2, 5}, {3, 6}});
    require_values(x.transpose(-1, -2), {{1, 4}, {2, 5}, {3, 6}});
    y.backward(Tensor({{10, 40}, {20, 50}, {30, 60}}));
    require_values(x.grad(), {{10, 20, 30}, {40, 50, 60}});
}

TEST_CASE("permute (2x3x4) by (2x0x1): y[k i j] = x[i j k]", "[ops][shape]") {
    Tensor x = arange(24).reshape({2, 3, 4});  // x[i,j,k] = 12i + 4j + k
    x.requires_grad_();
    Tensor y = x.permute({2, 0, 1});
    REQUIRE(y.shape() == Shape{4, 2, 3});
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < 3; ++j)
            for (std::int64_t k = 0; k < 4; ++k) REQUIRE(y.at({k, i, j}) == real(12 * i + 4 * j + k));
    // G[k,i,j] = 6k + 3i + j, so dL/dx[i,j,k] = G[k,i,j] = 6k + 3i + j.
    y.backward(arange(24).reshape({4, 2, 3}));
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < 3; ++j)
            for (std::int64_t k = 0; k < 4; ++k) REQUIRE(x.grad().at({i, j, k}) == real(6 * k + 3 * i + j));
    REQUIRE(x.permute({-1, 1, 0}).shape() == Shape{4, 3, 2});
}

TEST_CASE("concat along dims 1 - 0 and -1 - each input gets its slice of the gradient", "[ops][shape]") {
    Tensor a({{1, 2}, {3, 4}}, true);
    Tensor b({{5}, {6}}, true);
    Tensor y = concat({a, b}, 1);
    require_values(y, {{1, 2, 5}, {3, 4, 6}});
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1, 2}, {4, 5}});
    require_values(b.grad(), {{3}, {6}});

    Tensor c({{7, 8}}, true);
    Tensor z = concat({a, c, a}, 0);
    require_values(z, {{1, 2}, {3, 4}, {7, 8}, {1, 2}, {3, 4}});
    a.reset_grad();
    z.backward(arange(10).reshape({5, 2}));
    require_values(c.grad(), {{4, 5}});
    require_values(a.grad(), {{0 + 6, 1 + 7}, {2 + 8, 3 + 9}});  // a appears twice: slices add

    Tensor p = arange(8).reshape({2, 2, 2});
    Tensor q = arange(4).reshape({2, 2, 1});
    require_values(concat({p, q}, -1), {{{0, 1, 0}, {2, 3, 1}}, {{4, 5, 2}, {6, 7, 3}}});
}

// permute's data movement (core/permute.cpp) against xtensor's own transpose, on a 4-D array and
// every one of its 24 orders: the last dim kept (row memcpy) and moved (strided loop).
TEST_CASE("permute_array equals xt::transpose for every order of 4 dims", "[ops][permute]") {
    manual_seed(8);
    const Tensor x = randn({2, 3, 4, 5});
    std::vector<std::size_t> perm{0, 1, 2, 3};
    int orders = 0;
    do {
        INFO("perm " << perm[0] << perm[1] << perm[2] << perm[3]);
        const Array want = xt::transpose(x.data(), perm);
        require_values(from_array(permute_array(x.data(), perm)), from_array(want), 0);
        ++orders;
    } while (std::next_permutation(perm.begin(), perm.end()));
    REQUIRE(orders == 24);
}

TEST_CASE("reshape to a wrong numel throws ValueError with both shapes", "[ops][errors][shape]") {
    Tensor x = ones({2, 3});
    REQUIRE_THROWS_AS(x.reshape({4, 2}), ValueError);
    REQUIRE_THROWS_WITH(x.reshape({4, 2}), Contains("reshape") && Contains("(2, 3)") && Contains("(4, 2)"));
    REQUIRE_THROWS_WITH(x.reshape({4, -1}), Contains("reshape") && Contains("-1"));
    REQUIRE_THROWS_WITH(x.reshape({-1, -1}), Contains("reshape") && Contains("only one"));
    REQUIRE_THROWS_WITH(x.reshape({-2, -3}), Contains("reshape"));
}

TEST_CASE("permute with repeated or missing dims throws ValueError", "[ops][errors][shape]") {
    Tensor x = ones({2, 3, 4});
    REQUIRE_THROWS_AS(x.permute({0, 0, 1}), ValueError);
    REQUIRE_THROWS_WITH(x.permute({0, 0, 1}), Contains("permute") && Contains("repeat"));
    REQUIRE_THROWS_WITH(x.permute({2, -1, 0}), Contains("permute") && Contains("repeat"));
    REQUIRE_THROWS_WITH(x.permute({0, 1}), Contains("permute") && Contains("(2, 3, 4)"));
}

TEST_CASE("concat of mismatched shapes throws ValueError", "[ops][errors][shape]") {
    REQUIRE_THROWS_AS(concat({ones({2, 3}), ones({3, 2})}, 0), ValueError);
    REQUIRE_THROWS_WITH(concat({ones({2, 3}), ones({3, 2})}, 0),
                        Contains("concat") && Contains("(3, 2)") && Contains("(2, 3)"));
    REQUIRE_THROWS_WITH(concat({ones({2, 3}), ones({2, 3, 1})}, 0), Contains("concat"));
    REQUIRE_THROWS_WITH(concat({}, 0), Contains("concat"));
}

// ==== stack ==============================================================================================

TEST_CASE("stack - a new dim, negative dims, against PyTorch, gradients are the slices", "[ops][shape][torch]") {
    Tensor a({1, 2}, true), b({3, 4}, true);
    require_values(stack({a, b}), {{1, 2}, {3, 4}});
    Tensor y = stack({a, b}, -1);
    require_values(y, {{1, 3}, {2, 4}});
    weighted_sum(y, Tensor({{1, 2}, {3, 4}})).backward();
    require_values(a.grad(), {1, 3});
    require_values(b.grad(), {2, 4});
    REQUIRE(stack({Tensor(1.0), Tensor(2.0)}).shape() == Shape{2});  // 0-d tensors to (2,)

    std::vector<Tensor> xs;
    for (int k = 0; k < 3; ++k) xs.push_back(torch_ref("stack.x" + std::to_string(k), true));  // three (2, 3)
    for (int dim : {1, -1}) {
        INFO("dim " << dim);
        for (auto& t : xs) t.reset_grad();
        Tensor s = stack(xs, dim);
        require_values(s, torch_ref("stack.y_" + std::to_string(dim)));
        weighted_sum(s, torch_ref("stack.w_" + std::to_string(dim))).backward();
        for (int k = 0; k < 3; ++k)
            require_values(xs[static_cast<std::size_t>(k)].grad(), torch_ref("stack.dx" + std::to_string(k) + "_" + std::to_string(dim)));
    }
    REQUIRE_THROWS_WITH(stack({}), Contains("stack: needs at least one tensor"));
    REQUIRE_THROWS_WITH(stack({a, Tensor()}), Contains("stack: tensor 1 is undefined"));
    REQUIRE_THROWS_WITH(stack({a, zeros({3})}), Contains("stack: tensor 1 has shape (3), tensor 0 has (2); all must be equal"));
    REQUIRE_THROWS_WITH(stack({a, b}, 2), Contains("stack: dim 2 out of range [-2, 1] for 1-d tensors"));
    REQUIRE_THROWS_WITH(stack({a, b}, -3), Contains("stack: dim -3 out of range [-2, 1]"));
}
