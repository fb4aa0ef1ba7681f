// tests/core/test_slicing.cpp — narrow, split and chunk of core/slicing.cpp (float32): values by
// hand, gradients against PyTorch, piece sizes as in PyTorch, and the errors of hostile input.
//
// PyTorch values come from tests/reference/make_core_ops_reference.py (torch 1.13, float64),
// which wrote tests/reference/core_ops_reference.hpp; compared to 1e-5 in float32.
// Gradchecks: gradcheck_slicing.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <xgrad/core/ops.hpp>
#include "reference/core_ops_reference.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// ==== narrow / split / chunk =========================================================================

TEST_CASE("narrow - values by hand and negative start and dim", "[slicing]") {
    Tensor x({{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}});
    require_values(narrow(x, 1, 1, 3), Tensor({{1, 2, 3}, {6, 7, 8}}));
    require_values(narrow(x, -1, -2, 2), Tensor({{3, 4}, {8, 9}}));  // start -2 = 5 - 2
    require_values(x.narrow(0, 1, 1), Tensor({{5, 6, 7, 8, 9}}));
    REQUIRE(narrow(x, 1, 5, 0).shape() == Shape{2, 0});                // an empty slice at the end is fine
}

TEST_CASE("narrow split and chunk - gradients match PyTorch", "[slicing][torch]") {
    Tensor x = torch_ref("slice.x", true);  // (4, 5)
    // narrow: L = Σ narrow(x, 1, -4, 3)² so dL/dx = 2x in columns 1..3, 0 elsewhere
    narrow(x, 1, -4, 3).pow(2).sum().backward();
    require_values(x.grad(), torch_ref("slice.narrow_dx"));
    REQUIRE(x.grad().at({0, 0}) == 0);
    REQUIRE(x.grad().at({0, 1}) == Approx(2 * x.at({0, 1})));

    // split by 2 along the last dim: widths 2, 2, 1; L = Σ_k (k + 1) Σ piece_k²
    x.reset_grad();
    std::vector<Tensor> p = split(x, 2, -1);
    REQUIRE(p.size() == 3);
    for (std::size_t k = 0; k < p.size(); ++k) REQUIRE(p[k].shape()[1] == torch_ref("slice.split_sizes").data()(k));
    (p[0].pow(2).sum() + 2 * p[1].pow(2).sum() + 3 * p[2].pow(2).sum()).backward();
    require_values(x.grad(), torch_ref("slice.split_dx"));

    // chunk 4 rows into 3: ceil(4 / 3) = 2 rows each, so only 2 pieces (as torch.chunk)
    x.reset_grad();
    std::vector<Tensor> c = x.chunk(3, 0);
    REQUIRE(c.size() == 2);
    REQUIRE(torch_ref("slice.chunk_sizes").numel() == 2);
    (c[0].pow(2).sum() + 2 * c[1].pow(2).sum()).backward();
    require_values(x.grad(), torch_ref("slice.chunk_dx"));
}

TEST_CASE("split and chunk - piece sizes as in PyTorch", "[slicing]") {
    Tensor x = arange(10).reshape({2, 5});
    std::vector<Tensor> p = x.split(2, 1);
    REQUIRE(p.size() == 3);
    require_values(p[2], Tensor({{4}, {9}}));  // the last piece is smaller
    REQUIRE(split(x, 7, 1).size() == 1);       // split_size larger than the dim: one piece, all of it
    REQUIRE(chunk(arange(6), 4).size() == 3);  // 2, 2, 2: fewer than asked
    REQUIRE(chunk(arange(5), 6).size() == 5);  // 1 each
    std::vector<Tensor> q = chunk(arange(7), 3);  // 3, 3, 1
    REQUIRE(q.size() == 3);
    require_values(q[2], Tensor({6}));
    REQUIRE(chunk(zeros({0, 2}), 3).size() == 3);  // an empty dim: `chunks` empty pieces
    REQUIRE(split(zeros({0, 2}), 2).size() == 1);  // ...but one piece from split
    REQUIRE(split(zeros({0, 2}), 0).size() == 1);  // split_size 0 is allowed on an empty dim
}

TEST_CASE("narrow split and chunk - hostile input throws with the valid range", "[slicing][errors]") {
    Tensor x = zeros({2, 5});
    REQUIRE_THROWS_AS(narrow(x, 2, 0, 1), ValueError);
    REQUIRE_THROWS_WITH(narrow(x, 2, 0, 1), Contains("narrow") && Contains("[-2, 2)"));
    REQUIRE_THROWS_AS(narrow(x, 1, 6, 0), IndexError);  // start past the end
    REQUIRE_THROWS_WITH(narrow(x, 1, 6, 0), Contains("start 6 out of range [-5, 5]"));
    REQUIRE_THROWS_AS(narrow(x, 1, -6, 1), IndexError);
    REQUIRE_THROWS_AS(narrow(x, 1, 2, -1), ValueError);  // negative length
    REQUIRE_THROWS_WITH(narrow(x, 1, 2, -1), Contains("length -1 must be >= 0"));
    REQUIRE_THROWS_AS(narrow(x, 1, 3, 3), ValueError);  // runs past the end
    REQUIRE_THROWS_WITH(narrow(x, 1, 3, 3), Contains("start (3) + length (3) exceeds dim 1 of size 5") &&
                                                Contains("[0, 2]"));
    REQUIRE_THROWS_AS(narrow(Tensor(1.0), 0, 0, 0), ValueError);  // 0-d
    REQUIRE_THROWS_AS(split(x, 0, 1), ValueError);
    REQUIRE_THROWS_WITH(split(x, 0, 1), Contains("split_size can be 0 only when dim 1 has size 0"));
    REQUIRE_THROWS_AS(split(x, -1, 1), ValueError);
    REQUIRE_THROWS_AS(split(x, 2, -3), ValueError);
    REQUIRE_THROWS_AS(chunk(x, 0), ValueError);
    REQUIRE_THROWS_WITH(chunk(x, 0), Contains("chunks must be > 0, got 0"));
    REQUIRE_THROWS_AS(chunk(x, -2), ValueError);
    REQUIRE_THROWS_AS(chunk(x, 2, 5), ValueError);
}
