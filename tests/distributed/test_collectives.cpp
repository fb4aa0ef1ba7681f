// tests/distributed/test_collectives.cpp — broadcast, all_reduce, all_gather and reduce_scatter
// against values computed by hand, at whatever W the binary was started with (ctest runs it alone,
// W = 1, and under mpirun -np 2). Rank r contributes values built from r, so the expected result is a
// closed form in W: Σ_{r<W} (r + 1) = W(W + 1)/2, which is 3 for W = 2 and 1 for W = 1.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/signature.hpp>
#include <xgrad/distributed/distributed.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;
using xgrad::testing::require_values;

namespace {

// The W this test binary was started with: mpirun's OMPI_COMM_WORLD_SIZE, else 1.
int launched_world() {
    const char* w = std::getenv("OMPI_COMM_WORLD_SIZE");
    return w ? std::atoi(w) : 1;
}

}  // namespace

TEST_CASE("distributed: the world is what mpirun started", "[distributed]") {
    REQUIRE(dist::is_initialized());
    REQUIRE(dist::world_size() == launched_world());
    REQUIRE(dist::rank() >= 0);
    REQUIRE(dist::rank() < dist::world_size());
    if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) REQUIRE_THAT(dist::describe(), Catch::Contains("1 process"));
    else REQUIRE_THAT(dist::describe(), Catch::Contains(fmt::format("rank {} of {}", dist::rank(), dist::world_size())));
    dist::barrier();
}

TEST_CASE("distributed: all_reduce sums and averages over the ranks", "[distributed]") {
    const real r = real(dist::rank()), W = real(dist::world_size());
    const real s = W * (W + 1) / 2;  // Σ_r (r + 1)
    Tensor t{{r + 1, 2 * (r + 1)}, {-(r + 1), 0}};  // (2, 2): (r + 1)·[[1, 2], [−1, 0]]
    dist::all_reduce(t, dist::ReduceOp::Sum);
    require_values(t, Tensor{{s, 2 * s}, {-s, 0}});

    Tensor m{r + 1, 10 * (r + 1)};
    dist::all_reduce(m, dist::ReduceOp::Mean);
    require_values(m, Tensor{s / W, 10 * s / W});  // W = 2: [1.5, 15]

    std::vector<double> losses{double(r) + 1, 0.5};
    dist::all_reduce(losses, dist::ReduceOp::Mean);
    REQUIRE(losses[0] == Approx(double(s) / double(W)));
    REQUIRE(losses[1] == Approx(0.5));
}

TEST_CASE("distributed: broadcast copies the root's values into every rank", "[distributed]") {
    const int W = dist::world_size(), last = W - 1;
    Tensor t{real(dist::rank()), real(100 + dist::rank())};
    const std::uint64_t version = t.impl()->version;
    dist::broadcast(t, last);
    require_values(t, Tensor{real(last), real(100 + last)});
    REQUIRE(t.impl()->version > version);  // written in place, like mutable_data()
    Tensor u{real(dist::rank())};
    dist::broadcast(u);  // root 0 by default
    require_values(u, Tensor{real(0)});
    REQUIRE_THROWS_WITH(dist::broadcast(u, W), Catch::Contains(fmt::format("root {} is outside [0, {})", W, W)));
    REQUIRE_THROWS_WITH(dist::broadcast(u, -1), Catch::Contains("root -1 is outside"));
}

TEST_CASE("distributed: all_gather stacks the ranks' tensors along a new first axis", "[distributed]") {
    const int W = dist::world_size();
    const real r = real(dist::rank());
    const Tensor g = dist::all_gather(Tensor{r, 10 * r, -r});  // (3,) → (W, 3)
    REQUIRE(g.shape() == Shape{W, 3});
    for (int q = 0; q < W; ++q)
        for (int j = 0; j < 3; ++j) REQUIRE(g.data()(q, j) == real(q) * std::vector<real>{1, 10, -1}[std::size_t(j)]);
}

TEST_CASE("distributed: reduce_scatter gives rank r the sum over the ranks of their row r", "[distributed]") {
    // Every rank s holds t_s[i, j] = 100·s + 10·i + j, shape (W, 3). Rank r receives row r summed:
    // Σ_s (100·s + 10·r + j) = 100·W(W − 1)/2 + W·(10·r + j).
    const int W = dist::world_size(), r = dist::rank();
    Array a(ArrayShape{std::size_t(W), 3});
    for (int i = 0; i < W; ++i)
        for (int j = 0; j < 3; ++j) a(i, j) = real(100 * r + 10 * i + j);
    const Tensor t = from_array(a);
    const Tensor sum = dist::reduce_scatter(t);
    REQUIRE(sum.shape() == Shape{3});
    for (int j = 0; j < 3; ++j) REQUIRE(sum.data()(j) == real(100 * W * (W - 1) / 2 + W * (10 * r + j)));
    if (W == 1) require_values(sum, Tensor{0, 1, 2});  // the input's one row
    if (W == 2) require_values(sum, r == 0 ? Tensor{100, 102, 104} : Tensor{120, 122, 124});
    require_values(t, from_array(a));  // the input is left as it was
    REQUIRE_FALSE(sum.requires_grad());

    const Tensor mean = dist::reduce_scatter(t, dist::ReduceOp::Mean);  // the sum / W
    for (int j = 0; j < 3; ++j) REQUIRE(mean.data()(j) == Approx(100.0 * (W - 1) / 2 + 10 * r + j));
    if (W == 2) require_values(mean, r == 0 ? Tensor{50, 51, 52} : Tensor{60, 61, 62});
    require_values(t, from_array(a));  // Mean divides a copy
}

TEST_CASE("distributed: reduce_scatter keeps the trailing shape, empty or none", "[distributed]") {
    const int W = dist::world_size(), r = dist::rank();
    const std::size_t w = std::size_t(W);
    // (W, 2, 3): t_s[i, k, l] = (s + 1)·(10·i + 3·k + l); rank r: W(W + 1)/2 · (10·r + 3·k + l).
    Array a(ArrayShape{w, 2, 3});
    for (int i = 0; i < W; ++i)
        for (int k = 0; k < 2; ++k)
            for (int l = 0; l < 3; ++l) a(i, k, l) = real((r + 1) * (10 * i + 3 * k + l));
    const Tensor block = dist::reduce_scatter(from_array(a));
    REQUIRE(block.shape() == Shape{2, 3});
    for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 3; ++l) REQUIRE(block.data()(k, l) == real(W * (W + 1) / 2 * (10 * r + 3 * k + l)));
    if (W == 2) require_values(block, r == 0 ? Tensor{{0, 3, 6}, {9, 12, 15}} : Tensor{{30, 33, 36}, {39, 42, 45}});
    // (W, 0): every rank's segment is empty, and so is the result.
    const Tensor empty = dist::reduce_scatter(zeros({W, 0}));
    REQUIRE(empty.shape() == Shape{0});
    // (W,): t_s[i] = s + i; rank r receives the 0-d Σ_s (s + r) = W(W − 1)/2 + W·r.
    Array v(ArrayShape{w});
    for (int i = 0; i < W; ++i) v(i) = real(r + i);
    const Tensor scalar = dist::reduce_scatter(from_array(v));
    REQUIRE(scalar.dim() == 0);
    REQUIRE(scalar.item() == real(W * (W - 1) / 2 + W * r));
}

TEST_CASE("distributed: reduce_scatter refuses a t without one row per rank, on every rank", "[distributed]") {
    const int W = dist::world_size(), r = dist::rank();
    REQUIRE_THROWS_WITH(dist::reduce_scatter(zeros({W + 1, 2})),
                        Catch::Contains(fmt::format("reduce_scatter: t must have shape (W, ...), one row per rank, with W = "
                                                    "{} ranks; got ({}, 2)", W, W + 1)));
    REQUIRE_THROWS_WITH(dist::reduce_scatter(Tensor(3.5)), Catch::Contains("got a 0-dimensional tensor"));
    REQUIRE_THROWS_WITH(dist::reduce_scatter(Tensor()), Catch::Contains("reduce_scatter: got an undefined tensor"));
    if (W > 1) {
        // Rank 1 with (W, 3) against (W, 2) elsewhere: every rank throws, naming both shapes.
        REQUIRE_THROWS_WITH(dist::reduce_scatter(zeros({W, r == 1 ? 3 : 2})),
                            Catch::Contains("reduce_scatter: the ranks disagree") &&
                                Catch::Contains(fmt::format("rank 0: reduce_scatter Sum of float32 ({}, 2)", W)) &&
                                Catch::Contains(fmt::format("rank 1: reduce_scatter Sum of float32 ({}, 3)", W)));
        // Rank 1 alone without one row per rank: every rank throws, naming rank 1's reason.
        REQUIRE_THROWS_WITH(dist::reduce_scatter(zeros({r == 1 ? W + 1 : W, 2})),
                            Catch::Contains("reduce_scatter: the ranks disagree") &&
                                Catch::Contains(fmt::format("invalid: t must have shape (W, ...), one row per rank, with "
                                                            "W = {} ranks; got ({}, 2)", W, W + 1)));
        // Sum on one rank, Mean on the others.
        REQUIRE_THROWS_WITH(dist::reduce_scatter(ones({W}), r == 0 ? dist::ReduceOp::Sum : dist::ReduceOp::Mean),
                            Catch::Contains(fmt::format("reduce_scatter Sum of float32 ({})", W)) &&
                                Catch::Contains(fmt::format("reduce_scatter Mean of float32 ({})", W)));
    }
    const Tensor ok = dist::reduce_scatter(ones({W, 2}));  // the ranks are still in step
    require_values(ok, Tensor{real(W), real(W)});
}

TEST_CASE("distributed: a row-sparse gradient is summed row by row without densifying", "[distributed]") {
    // Rank r holds rows {r, r + 2} of a (6, 2) table, values (r + 1)·[1, 2] and (r + 1)·[10, 20].
    // W = 2: rank 0 rows {0, 2}, rank 1 rows {1, 3}, no overlap; W = 1: rows {0, 2}.
    // The overlap case is the rank-independent row 5, which every rank holds with value [1, 1].
    const int W = dist::world_size(), r = dist::rank();
    SparseGrad g;
    g.dense_shape = {6, 2};
    g.values = Array(ArrayShape{0, 2});
    g.accumulate({r, r + 2, 5}, Array{{real(r + 1), real(2 * (r + 1))}, {real(10 * (r + 1)), real(20 * (r + 1))}, {1, 1}});
    const SparseGrad sum = dist::all_reduce(g, dist::ReduceOp::Sum);
    // The union, sorted: W = 2 → {0, 1, 2, 3, 5}; W = 1 → {0, 2, 5}.
    std::vector<std::int64_t> rows;
    for (int q = 0; q < W; ++q) rows.insert(rows.end(), {q, q + 2});
    rows.push_back(5);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    REQUIRE(sum.indices == rows);
    REQUIRE(sum.values.shape()[0] == rows.size());
    const Array dense = sum.to_dense();  // (6, 2), only to read the rows by number
    Array expected = xt::zeros<real>({6, 2});  // at W ≥ 3 the rows r + 2 and r' = r + 2 overlap
    for (int q = 0; q < W; ++q) {
        expected(q, 0) += real(q + 1), expected(q, 1) += real(2 * (q + 1));
        expected(q + 2, 0) += real(10 * (q + 1)), expected(q + 2, 1) += real(20 * (q + 1));
    }
    for (int row : {0, 1, 2, 3})
        for (int j : {0, 1}) REQUIRE(dense(row, j) == expected(row, j));
    REQUIRE(dense(5, 0) == real(W));  // [1, 1] from each of the W ranks
    if (W <= 2) REQUIRE(dense(4, 0) == 0);  // no rank looked up row 4

    const SparseGrad mean = dist::all_reduce(g, dist::ReduceOp::Mean);
    REQUIRE(mean.indices == rows);
    REQUIRE(mean.to_dense()(5, 1) == Approx(1.0));
    REQUIRE(mean.to_dense()(0, 1) == Approx(2.0 / W));
}

TEST_CASE("distributed: a bad argument on every rank is refused on every rank", "[distributed]") {
    Tensor undefined;
    REQUIRE_THROWS_WITH(dist::all_reduce(undefined), Catch::Contains("all_reduce: got an undefined tensor"));
    SparseGrad g;
    g.dense_shape = {3, 2};
    g.indices = {0, 1};
    g.values = Array(ArrayShape{1, 2});  // 2 indices, 1 row
    REQUIRE_THROWS_WITH(dist::all_reduce(g), Catch::Contains("values of shape (1, 2) do not match 2 indices"));
    g.values = Array(ArrayShape{2, 2});
    g.indices = {0, -1};
    REQUIRE_THROWS_WITH(dist::all_reduce(g), Catch::Contains("row index -1 is outside [0, 3)"));
}

TEST_CASE("distributed: Mean divides before it sums, so a finite mean never overflows", "[distributed]") {
    const real big = std::numeric_limits<real>::max();
    Tensor t{big, -big};
    dist::all_reduce(t, dist::ReduceOp::Mean);  // W copies of FLT_MAX: the sum overflows, the mean does not
    require_values(t, Tensor{big, -big}, 1e-6);
}

TEST_CASE("distributed: a rank with no rows still takes part in the sparse sum", "[distributed]") {
    const int r = dist::rank();
    SparseGrad g;
    g.dense_shape = {4, 3};
    g.values = Array(ArrayShape{0, 3});
    if (r == 0) g.accumulate({2}, Array{{1, 2, 3}});  // the other ranks: k = 0
    const SparseGrad sum = dist::all_reduce(g);
    REQUIRE(sum.indices == std::vector<std::int64_t>{2});
    REQUIRE(sum.to_dense()(2, 2) == 3);
}

TEST_CASE("distributed: ranks that disagree get the same clear error, never a hang", "[distributed]") {
    const int W = dist::world_size(), r = dist::rank();
    if (W == 1) {  // alone, nothing can disagree
        dist::check_same_on_all_ranks("flags", fmt::format("--steps {}", 20 + r));
        return;
    }
    Tensor t = zeros({r + 1});  // rank 0: (1,), rank 1: (2,)
    REQUIRE_THROWS_WITH(dist::all_reduce(t),
                        Catch::Contains("all_reduce: the ranks disagree") && Catch::Contains("rank 0: all_reduce Sum of float32 (1)") &&
                            Catch::Contains("rank 1: all_reduce Sum of float32 (2)"));
    REQUIRE_THROWS_AS(dist::all_gather(t), ValueError);
    Tensor same = zeros({2});  // a broadcast on one rank against an all_reduce on the other
    if (r == 0) REQUIRE_THROWS_WITH(dist::broadcast(same), Catch::Contains("disagree on the collective"));
    else REQUIRE_THROWS_WITH(dist::all_reduce(same), Catch::Contains("disagree on the collective"));
    REQUIRE_THROWS_WITH(dist::check_same_on_all_ranks("gpt: flags", fmt::format("--steps {}", r == 1 ? 21 : 20)),
                        Catch::Contains("gpt: flags: rank 1 differs from rank 0: line 1 is '--steps 21' on rank 1 and "
                                        "'--steps 20' on rank 0"));
    dist::check_same_on_all_ranks("gpt: flags", "--steps 20");  // equal texts pass
    // Calls that differ only in their op, or where one rank's argument is invalid: every rank throws.
    Tensor u = ones({2});
    REQUIRE_THROWS_WITH(dist::all_reduce(u, r == 0 ? dist::ReduceOp::Sum : dist::ReduceOp::Mean),
                        Catch::Contains("all_reduce Sum of float32 (2)") && Catch::Contains("all_reduce Mean of float32 (2)"));
    REQUIRE_THROWS_WITH(dist::broadcast(u, r == 1 ? 5 : 0), Catch::Contains(fmt::format("invalid: root 5 is outside [0, {})", W)));
    Tensor undefined_on_1 = r == 1 ? Tensor() : ones({2});
    REQUIRE_THROWS_WITH(dist::all_reduce(undefined_on_1), Catch::Contains("invalid: got an undefined tensor"));
    SparseGrad bad;  // rank 1: an index outside [0, V)
    bad.dense_shape = {6, 2};
    bad.values = Array(ArrayShape{0, 2});
    if (r == 1) bad.accumulate({0}, Array{{1, 1}}), bad.indices[0] = 10;
    REQUIRE_THROWS_WITH(dist::all_reduce(bad), Catch::Contains("row index 10 is outside [0, 6)"));
    // Different collectives at one point, including the ones without a tensor.
    if (r == 0) REQUIRE_THROWS_WITH(dist::barrier(), Catch::Contains("barrier"));
    else REQUIRE_THROWS_WITH(dist::all_reduce(u), Catch::Contains("barrier"));
    if (r == 0) REQUIRE_THROWS_WITH(dist::check_same_on_all_ranks("flags", "x"), Catch::Contains("all_reduce Sum of float32 (2)"));
    else REQUIRE_THROWS_WITH(dist::all_reduce(u), Catch::Contains("check_same_on_all_ranks(flags)"));
    // After the refusals the ranks are still in step: a collective works.
    Tensor ok = ones({3});
    dist::all_reduce(ok);
    require_values(ok, Tensor{real(W), real(W), real(W)});
}

TEST_CASE("distributed: a float rank and a double rank are refused on every rank, naming both types",
          "[distributed][regression]") {
    using dist::backend::Number;
    const int W = dist::world_size(), r = dist::rank();
    if (W > 1) {
        // Rank 1 plays a program built with real = double: the signature its all_reduce sends,
        // then, if no rank objects, its doubles (2 of them: 16 bytes against rank 0's 8).
        auto refused = [](auto&& call) {
            REQUIRE_THROWS_WITH(call(), Catch::Contains("all_reduce: the ranks disagree") &&
                                            Catch::Contains("rank 0: all_reduce Sum of float32 (2)") &&
                                            Catch::Contains("rank 1: all_reduce Sum of float64 (2)"));
        };
        if (r == 1) {
            refused([] {
                dist::detail::check_agree("all_reduce", dist::detail::tensor_signature("all_reduce Sum", Number::Double, {2}));
                std::vector<double> mine{1, 2};
                dist::backend::all_reduce_sum(mine.data(), mine.size(), Number::Double);
            });
        } else {
            Tensor t{1, 2};
            refused([&] { dist::all_reduce(t); });
            require_values(t, Tensor{1, 2});  // refused before any byte was sent
        }
        // The same for the other collectives that send elements of real.
        Tensor u{1, 2};
        if (r == 1)
            REQUIRE_THROWS_WITH(
                dist::detail::check_agree("broadcast", dist::detail::tensor_signature("broadcast from 0", Number::Double, {2})),
                Catch::Contains("broadcast from 0 of float64 (2)"));
        else REQUIRE_THROWS_WITH(dist::broadcast(u), Catch::Contains("rank 0: broadcast from 0 of float32 (2)"));
        if (r == 1)
            REQUIRE_THROWS_WITH(dist::detail::check_agree("all_gather", dist::detail::tensor_signature("all_gather", Number::Double, {2})),
                                Catch::Contains("all_gather of float64 (2)"));
        else REQUIRE_THROWS_WITH(dist::all_gather(u), Catch::Contains("rank 0: all_gather of float32 (2)"));
        if (r == 1)
            REQUIRE_THROWS_WITH(
                dist::detail::check_agree("reduce_scatter", dist::detail::tensor_signature("reduce_scatter Sum", Number::Double, {W})),
                Catch::Contains(fmt::format("reduce_scatter Sum of float64 ({})", W)));
        else
            REQUIRE_THROWS_WITH(dist::reduce_scatter(ones({W})),
                                Catch::Contains(fmt::format("rank 0: reduce_scatter Sum of float32 ({})", W)));
        Tensor ok = ones({3});  // still in step
        dist::all_reduce(ok);
        require_values(ok, Tensor{real(W), real(W), real(W)});
    }
    REQUIRE(std::string(dist::detail::type_name(Number::Float)) == "float32");
    REQUIRE(dist::detail::tensor_signature("all_reduce Sum", Number::Double, {4, 3}) == "all_reduce Sum of float64 (4, 3)");
}
