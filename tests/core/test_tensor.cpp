// tests/core/test_tensor.cpp — the Tensor handle and IndexTensor of core/tensor.hpp (float32).
//
// Covers: shape / numel / dim / size / item / at, operator<<, the factories (zeros, ones, full,
// arange, randn, rand, randint) and manual_seed reproducibility, nested-brace construction
// (ragged lists throw), handle copies sharing data, detach, IndexTensor (and its arange),
// SparseGrad, and the errors of misuse: item on many elements, at out of range, shapes whose
// element count overflows. The malloc policy and alignment are in test_allocator.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <xgrad/core/ops.hpp>
#include "reference/core_ops_reference.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

static_assert(std::is_base_of_v<std::invalid_argument, ValueError>);
static_assert(std::is_base_of_v<std::out_of_range, IndexError>);

namespace {

constexpr std::size_t k2p62 = std::size_t{1} << 62;

}  // namespace

TEST_CASE("shape - numel - dim and size of a (2 - 3) tensor", "[tensor]") {
    Tensor t({{1, 2, 3}, {4, 5, 6}});
    REQUIRE(t.defined());
    REQUIRE(t.shape() == Shape{2, 3});
    REQUIRE(t.numel() == 6);
    REQUIRE(t.dim() == 2);
    REQUIRE(t.size(0) == 2);
    REQUIRE(t.size(1) == 3);
    REQUIRE(t.size(-1) == 3);
    REQUIRE(t.size(-2) == 2);
    REQUIRE_THROWS_AS(t.size(2), ValueError);
    REQUIRE_THROWS_WITH(t.size(-3), Contains("size") && Contains("[-2, 2)"));
    // One integer type for sizes, as PyTorch's int64_t: they go back into factories unconverted.
    static_assert(std::is_same_v<decltype(t.size(0)), std::int64_t>);
    static_assert(std::is_same_v<decltype(t.numel()), std::int64_t>);
    static_assert(std::is_same_v<Shape::value_type, std::int64_t>);
    const std::int64_t B = t.size(0), T = t.size(1);
    REQUIRE(randn({B, T}).shape() == t.shape());
    REQUIRE_THROWS_WITH(zeros({2, -3}), Contains("zeros") && Contains("negative size -3") && Contains("(2, -3)"));
}

TEST_CASE("set_data replaces values and shape, bumps the version, and drops a gradient of another shape",
          "[tensor]") {
    Tensor w = ones({2, 3}, true);
    w.set_grad(ones({2, 3}));
    const auto v0 = w.impl()->version;
    w.set_data(Tensor({{7, 8, 9}, {1, 2, 3}}).data());  // same shape: the gradient stays
    REQUIRE(w.impl()->version == v0 + 1);
    REQUIRE(w.has_grad());
    REQUIRE(w.at({0, 2}) == 9);
    w.set_data(zeros({4}).data());  // another shape: the gradient goes
    REQUIRE(w.shape() == Shape{4});
    REQUIRE_FALSE(w.has_grad());
    REQUIRE(w.requires_grad());
}

TEST_CASE("an undefined tensor reports itself and refuses data access", "[tensor]") {
    Tensor u;
    REQUIRE_FALSE(u.defined());
    REQUIRE_FALSE(u.requires_grad());
    REQUIRE_THROWS_AS(u.shape(), ValueError);
    REQUIRE_THROWS_WITH(u.numel(), Contains("numel") && Contains("undefined"));
    std::ostringstream os;
    os << u;
    REQUIRE(os.str() == "Tensor(undefined)");
}

TEST_CASE("item reads a one-element tensor of any rank", "[tensor]") {
    REQUIRE(Tensor(3.5).dim() == 0);
    REQUIRE(Tensor(3.5).shape() == Shape{});
    REQUIRE(Tensor(3.5).numel() == 1);
    REQUIRE(Tensor(3.5).item() == 3.5f);
    REQUIRE(Tensor({-2}).item() == -2.0f);
    REQUIRE(Tensor({{{7}}}).item() == 7.0f);
}

TEST_CASE("item on a multi-element tensor throws ValueError naming item and the shape", "[tensor][errors]") {
    Tensor t({1, 2});
    REQUIRE_THROWS_AS(t.item(), ValueError);
    REQUIRE_THROWS_AS(t.item(), std::invalid_argument);
    REQUIRE_THROWS_WITH(t.item(), Contains("item") && Contains("(2)"));
}

TEST_CASE("at reads and writes by multi-index", "[tensor]") {
    Tensor t({{1, 2, 3}, {4, 5, 6}});
    REQUIRE(t.at({0, 0}) == 1.0f);
    REQUIRE(t.at({0, 2}) == 3.0f);
    REQUIRE(t.at({1, 0}) == 4.0f);
    REQUIRE(t.at({1, 2}) == 6.0f);
    t.mutable_data()(1, 1) = 50;
    REQUIRE(t.data()(1, 1) == 50.0f);
    const Tensor& c = t;
    REQUIRE(c.at({1, 1}) == 50.0f);
}

TEST_CASE("at out of range throws IndexError with the index and the valid range", "[tensor][errors]") {
    Tensor t({{1, 2, 3}, {4, 5, 6}});
    REQUIRE_THROWS_AS(t.at({2, 0}), IndexError);
    REQUIRE_THROWS_AS(t.at({0, 3}), std::out_of_range);
    REQUIRE_THROWS_WITH(t.at({0, 3}), Contains("at") && Contains("index 3") && Contains("[0, 3)"));
    REQUIRE_THROWS_WITH(t.at({2, 0}), Contains("index 2") && Contains("[0, 2)"));
    // Wrong number of indices.
    REQUIRE_THROWS_AS(t.at({1}), IndexError);
    REQUIRE_THROWS_WITH(t.at({1, 1, 1}), Contains("at") && Contains("3 indices"));
}

TEST_CASE("operator<< prints the shape - requires_grad and grad_fn", "[tensor]") {
    std::ostringstream plain;
    plain << zeros({2, 3});
    REQUIRE_THAT(plain.str(), Contains("Tensor(shape=(2, 3))"));

    Tensor x = ones({4}, true);
    std::ostringstream leaf;
    leaf << x;
    REQUIRE_THAT(leaf.str(), Contains("shape=(4)") && Contains("requires_grad=true"));

    std::ostringstream op;
    op << x * x;
    REQUIRE_THAT(op.str(), Contains("grad_fn=mul"));

    std::ostringstream ids;
    ids << IndexTensor{{1, 2}, {3, 4}};
    REQUIRE_THAT(ids.str(), Contains("IndexTensor(shape=(2, 2))"));
}

TEST_CASE("zeros - ones and full", "[tensor][factory]") {
    Tensor z = zeros({2, 3});
    require_values(z, {{0, 0, 0}, {0, 0, 0}});
    REQUIRE_FALSE(z.requires_grad());
    Tensor o = ones({3}, true);
    require_values(o, {1, 1, 1});
    REQUIRE(o.requires_grad());
    REQUIRE(o.is_leaf());
    require_values(full({2, 2}, -2.5), {{-2.5, -2.5}, {-2.5, -2.5}});
    REQUIRE(zeros({}).shape() == Shape{});
    REQUIRE(zeros({}).numel() == 1);
    REQUIRE(ones({0, 4}).numel() == 0);
}

TEST_CASE("arange", "[tensor][factory]") {
    require_values(arange(5), {0, 1, 2, 3, 4});
    require_values(arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75});
    require_values(arange(3, 0, -1), {3, 2, 1});
    require_values(arange(0, 1, 0.3), {0, 0.3, 0.6, 0.9});  // ceil(1 / 0.3) = 4 elements
    REQUIRE(arange(2, 1).numel() == 0);
    REQUIRE_THROWS_AS(arange(0, 1, 0), ValueError);
    REQUIRE_THROWS_WITH(arange(0, 1, 0), Contains("arange"));
}

TEST_CASE("randn and rand are reproducible bit for bit after manual_seed", "[tensor][factory][random]") {
    manual_seed(1234);
    Tensor a = randn({64, 33});
    Tensor u = rand({100});
    IndexTensor i = randint(0, 10, {50});
    manual_seed(1234);
    Tensor b = randn({64, 33});
    Tensor v = rand({100});
    IndexTensor j = randint(0, 10, {50});

    REQUIRE(a.shape() == Shape{64, 33});
    REQUIRE(std::memcmp(a.data().data(), b.data().data(), a.numel() * sizeof(real)) == 0);
    REQUIRE(std::memcmp(u.data().data(), v.data().data(), u.numel() * sizeof(real)) == 0);
    const bool same_ids = i.data() == j.data();  // xtensor's ==: shapes and all values
    REQUIRE(same_ids);

    // A different seed gives different numbers.
    manual_seed(1235);
    Tensor c = randn({64, 33});
    REQUIRE(std::memcmp(a.data().data(), c.data().data(), a.numel() * sizeof(real)) != 0);
}

TEST_CASE("randn - rand and randint have the right range and moments", "[tensor][factory][random]") {
    manual_seed(7);
    // 20,000 samples of N(0, 1): the sample mean has standard error 0.007, the variance 0.01.
    Tensor n = randn({20000});
    double s = 0, s2 = 0;
    for (real v : n.data()) {
        s += v;
        s2 += double(v) * v;
    }
    const double mean = s / 20000, var = s2 / 20000 - mean * mean;
    REQUIRE(std::abs(mean) < 0.05);
    REQUIRE(std::abs(var - 1) < 0.05);

    Tensor u = rand({20000}, true);
    REQUIRE(u.requires_grad());
    double su = 0;
    for (real v : u.data()) {
        REQUIRE(v >= 0);
        REQUIRE(v < 1);
        su += v;
    }
    REQUIRE(std::abs(su / 20000 - 0.5) < 0.02);

    IndexTensor ids = randint(-3, 4, {2, 500});
    REQUIRE(ids.shape() == Shape{2, 500});
    bool saw_low = false, saw_high = false;
    for (auto v : ids.data()) {
        REQUIRE(v >= -3);
        REQUIRE(v < 4);
        saw_low = saw_low || v == -3;
        saw_high = saw_high || v == 3;
    }
    REQUIRE(saw_low);
    REQUIRE(saw_high);
    REQUIRE_THROWS_WITH(randint(3, 3, {2}), Contains("randint"));
}

TEST_CASE("nested braces give the shape of the nesting", "[tensor][construct]") {
    Tensor m({{1, 2, 3}, {4, 5, 6}});
    REQUIRE(m.shape() == Shape{2, 3});
    REQUIRE(m.at({1, 0}) == 4.0f);
    Tensor col({{0.5}, {-1}});
    REQUIRE(col.shape() == Shape{2, 1});
    REQUIRE(col.at({1, 0}) == -1.0f);
    Tensor cube({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
    REQUIRE(cube.shape() == Shape{2, 2, 2});
    REQUIRE(cube.at({1, 0, 1}) == 6.0f);
    Tensor v{1.5, 2.5};
    REQUIRE(v.shape() == Shape{2});
    Tensor w({1, 2}, true);
    REQUIRE(w.requires_grad());
    // From an xtensor expression (evaluated and copied).
    Array a = {{1, 2}, {3, 4}};
    Tensor fa(a * 2);
    require_values(fa, {{2, 4}, {6, 8}});
}

TEST_CASE("a ragged nested list throws ValueError", "[tensor][construct][errors]") {
    auto short_row = [] { return Tensor({{1, 2}, {3}}); };
    auto long_row = [] { return Tensor({{1, 2}, {3, 4, 5}}); };
    auto scalar_row = [] { return Tensor({{1, 2}, 3}); };
    auto list_in_vector = [] { return Tensor({1, {2, 3}}); };
    REQUIRE_THROWS_AS(short_row(), ValueError);
    REQUIRE_THROWS_WITH(short_row(), Contains("tensor") && Contains("ragged"));
    REQUIRE_THROWS_WITH(long_row(), Contains("ragged"));
    REQUIRE_THROWS_WITH(scalar_row(), Contains("ragged"));
    REQUIRE_THROWS_WITH(list_in_vector(), Contains("ragged"));
    REQUIRE_THROWS_AS(IndexTensor({{1, 2}, {3}}), ValueError);
}

TEST_CASE("copying a handle shares data - gradient and graph", "[tensor]") {
    Tensor a({1, 2, 3}, true);
    Tensor b = a;
    REQUIRE(b.impl() == a.impl());
    b.mutable_data()(0) = 10;
    REQUIRE(a.at({0}) == 10.0f);
    b.mutable_data()(2) = 30;
    REQUIRE(a.at({2}) == 30.0f);
    (b * 2).sum().backward();
    REQUIRE(a.has_grad());
    require_values(a.grad(), {2, 2, 2});
}

TEST_CASE("detach copies the values and has no history", "[tensor]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = x * 2;
    REQUIRE(y.grad_fn() != nullptr);
    Tensor d = y.detach();
    REQUIRE(d.grad_fn() == nullptr);
    REQUIRE(d.is_leaf());
    REQUIRE_FALSE(d.requires_grad());
    require_values(d, {2, 4, 6});
    d.mutable_data()(0) = 100;  // a copy: y is unchanged
    REQUIRE(y.at({0}) == 2.0f);
    Tensor dx = x.detach();
    REQUIRE(dx.impl() != x.impl());
}

TEST_CASE("requires_grad_ - is_leaf - set_grad and reset_grad", "[tensor]") {
    Tensor x({1, 2});
    REQUIRE_FALSE(x.requires_grad());
    x.requires_grad_();
    REQUIRE(x.requires_grad());
    REQUIRE(x.is_leaf());
    Tensor y = x * 3;
    REQUIRE_FALSE(y.is_leaf());
    REQUIRE_THROWS_WITH(y.requires_grad_(false), Contains("requires_grad_") && Contains("non-leaf"));

    REQUIRE_FALSE(x.has_grad());
    x.set_grad(Tensor({5, 6}));
    require_values(x.grad(), {5, 6});
    REQUIRE_THROWS_AS(x.set_grad(Tensor({1, 2, 3})), ValueError);
    REQUIRE_THROWS_WITH(x.set_grad(Tensor({1, 2, 3})), Contains("set_grad") && Contains("(3)") && Contains("(2)"));
    x.reset_grad();
    REQUIRE_FALSE(x.has_grad());
    REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("IndexTensor from a std::vector<int64_t>, as torch::tensor(vector), with or without a shape",
          "[tensor][index]") {
    const std::vector<std::int64_t> ids{4, 0, 7, 7, 1, 2};
    const IndexTensor flat(ids);
    REQUIRE(flat.shape() == Shape{6});
    REQUIRE(flat[2] == 7);
    const IndexTensor grid(ids, {2, 3});
    REQUIRE(grid.shape() == Shape{2, 3});
    REQUIRE(grid.size(0) == 2);
    REQUIRE(grid.size(-1) == 3);
    REQUIRE(grid.data()(1, 0) == 7);
    REQUIRE(grid.data()(1, 2) == 2);
    REQUIRE(IndexTensor(std::vector<std::int64_t>{}).shape() == Shape{0});
    REQUIRE_THROWS_WITH(IndexTensor(ids, {4, 2}), Contains("IndexTensor") && Contains("(4, 2)") &&
                                                      Contains("8 elements") && Contains("6 values"));
    REQUIRE_THROWS_WITH(IndexTensor(ids, {-2, -3}), Contains("negative size -2"));
    REQUIRE_THROWS_WITH(grid.size(2), Contains("IndexTensor::size") && Contains("[-2, 2)"));
}

// Any integer vector, as torch::tensor(std::vector<int>) gives int64: the values as they are
// (negative ones too, such as cross_entropy's ignore_index -100); an unsigned value past int64's
// range (a negative number wrapped to std::size_t) is refused by value and position.
TEST_CASE("IndexTensor from a vector of any integer type - range checked", "[tensor][index][regression]") {
    const IndexTensor expected{4, 0, 7, -100};
    CHECK(equal(IndexTensor(std::vector<int>{4, 0, 7, -100}), expected));
    CHECK(equal(IndexTensor(std::vector<long long>{4, 0, 7, -100}), expected));
    CHECK(equal(IndexTensor(std::vector<short>{4, 0, 7, -100}), expected));
    const IndexTensor positive{4, 0, 7, 4294967295};
    CHECK(equal(IndexTensor(std::vector<unsigned>{4, 0, 7, 4294967295u}), positive));
    CHECK(equal(IndexTensor(std::vector<std::size_t>{4, 0, 7, 4294967295u}), positive));
    CHECK(equal(IndexTensor(std::vector<std::uint8_t>{1, 2, 3, 4}, {2, 2}), IndexTensor{{1, 2}, {3, 4}}));
    CHECK(IndexTensor(std::vector<int>{}).shape() == Shape{0});
    const std::size_t wrapped = static_cast<std::size_t>(-1);  // -1 as a std::size_t
    CHECK(message_of<IndexError>([&] { IndexTensor(std::vector<std::size_t>{0, 2, wrapped}); }) ==
          "IndexTensor: value 18446744073709551615 at position 2 does not fit in int64 (at most "
          "9223372036854775807): a negative number converted to an unsigned type?");
    CHECK(message_of<IndexError>([] { IndexTensor(std::vector<std::uint64_t>{std::uint64_t(1) << 63}, {1}); }) ==
          "IndexTensor: value 9223372036854775808 at position 0 does not fit in int64 (at most "
          "9223372036854775807): a negative number converted to an unsigned type?");
    CHECK_THROWS_WITH(IndexTensor(std::vector<int>{1, 2, 3}, {2, 2}), Contains("4 elements") && Contains("3 values"));
}

TEST_CASE("IndexTensor construction - access and reshape", "[tensor][index]") {
    IndexTensor ids{{0, 1, 2}, {3, 3, 1}};
    REQUIRE(ids.shape() == Shape{2, 3});
    REQUIRE(ids.numel() == 6);
    REQUIRE(ids.dim() == 2);
    REQUIRE(ids[0] == 0);
    REQUIRE(ids[3] == 3);
    REQUIRE(ids[5] == 1);
    REQUIRE(ids.data()(1, 2) == 1);
    REQUIRE_THROWS_AS(ids[6], IndexError);
    REQUIRE_THROWS_WITH(ids[6], Contains("IndexTensor") && Contains("[0, 6)"));

    IndexTensor flat = ids.reshape({6});
    REQUIRE(flat.shape() == Shape{6});
    REQUIRE(flat[4] == 3);
    REQUIRE_THROWS_AS(ids.reshape({4}), ValueError);

    IndexTensor empty;  // default: shape (0,), no garbage ID to look up
    REQUIRE(empty.shape() == Shape{0});
    REQUIRE(empty.numel() == 0);

    IndexTensor one{7};
    REQUIRE(one.shape() == Shape{1});
    REQUIRE(one[0] == 7);
    IndexTensor from_xt(IndexArray{5, -1});
    REQUIRE(from_xt.shape() == Shape{2});
    REQUIRE(from_xt[1] == -1);
}

TEST_CASE("SparseGrad coalesces rows: sorted unique indices - duplicates summed", "[tensor][sparse]") {
    SparseGrad sg;
    sg.dense_shape = {5, 2};
    REQUIRE(sg.nbytes() == 0);  // empty: no rows, no bytes (not one stray 0-d element)
    sg.accumulate({3, 1, 3}, Array{{1, 2}, {10, 20}, {100, 200}});
    REQUIRE(sg.indices == std::vector<std::int64_t>{1, 3});
    require_values(from_array(sg.values), {{10, 20}, {101, 202}});
    sg.accumulate({0, 3}, Array{{5, 5}, {1, 1}});
    REQUIRE(sg.indices == std::vector<std::int64_t>{0, 1, 3});
    require_values(from_array(sg.to_dense()), {{5, 5}, {10, 20}, {0, 0}, {102, 203}, {0, 0}});
    REQUIRE(sg.nbytes() == 3 * sizeof(std::int64_t) + 6 * sizeof(real));
    REQUIRE_THROWS_AS(sg.accumulate({1}, Array{{1, 2, 3}}), ValueError);
    REQUIRE_THROWS_WITH(sg.accumulate({1, 2}, Array{{1, 2}}), Contains("SparseGrad::accumulate"));
}

TEST_CASE("a tensor holding a row-sparse gradient refuses dense access - a dense gradient sums into a dense one",
          "[tensor][sparse]") {
    Tensor E = zeros({4, 2}, true);
    set_leaf_grad(*E.impl(), RowSparseGrad{{2}, Array{{1, 1}}, /*keep_sparse=*/true});  // row 2 = [1, 1]
    REQUIRE(E.has_grad());
    REQUIRE(E.sparse_grad() != nullptr);
    REQUIRE_THROWS_AS(E.grad(), ValueError);
    REQUIRE_THROWS_WITH(E.grad(), Contains("grad") && Contains("row-sparse"));
    // sparse + dense is dense (a sparse table tied to an output head, nn/tying.hpp).
    E.sum().backward();
    REQUIRE(E.sparse_grad() == nullptr);
    require_values(E.grad(), {{1, 1}, {1, 1}, {2, 2}, {1, 1}});
    E.reset_grad();
    REQUIRE_FALSE(E.has_grad());
    E.sum().backward();
    require_values(E.grad(), {{1, 1}, {1, 1}, {1, 1}, {1, 1}});
}

// A shape whose element count does not fit in 64 bits used to wrap around to a small count:
// the tensor kept the huge shape over a tiny (or no) buffer, and writing to it crashed.
TEST_CASE("a shape whose element count overflows throws ValueError in every factory and reshape", "[tensor][errors]") {
    const std::size_t big = std::size_t{1} << 40;  // big · big = 2^80 elements
    REQUIRE_THROWS_AS(zeros({big, big}), ValueError);
    REQUIRE_THROWS_WITH(zeros({big, big}), Contains("zeros") && Contains("overflow"));
    REQUIRE_THROWS_WITH(ones({big, big}), Contains("ones"));
    REQUIRE_THROWS_WITH(full({big, big}, 1), Contains("full"));
    REQUIRE_THROWS_WITH(randn({big, big}), Contains("randn"));
    REQUIRE_THROWS_WITH(rand({std::size_t{1} << 33, std::size_t{1} << 31, 3}), Contains("rand"));
    REQUIRE_THROWS_WITH(randint(0, 5, {big, big}), Contains("randint"));
    REQUIRE_THROWS_WITH(zeros({0}).reshape({std::int64_t{1} << 32, std::int64_t{1} << 32}),
                        Contains("reshape") && Contains("overflow"));
    REQUIRE_THROWS_WITH(IndexTensor(IndexArray(ArrayShape{0})).reshape({big, big}), Contains("IndexTensor::reshape"));
    // a zero anywhere makes the product 0, however large the other sizes: that is a valid empty tensor
    REQUIRE(zeros({big, 0}).numel() == 0);
}

// ==== IndexTensor::arange =============================================================================

TEST_CASE("IndexTensor arange - values and errors", "[arange]") {
    IndexTensor t = IndexTensor::arange(4);
    REQUIRE(t.shape() == Shape{4});
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(t[i] == static_cast<std::int64_t>(i));
    REQUIRE(IndexTensor::arange(0).numel() == 0);
    IndexTensor s = IndexTensor::arange(0, 10, 3);  // 0 3 6 9, as torch.arange(0, 10, 3)
    REQUIRE(s.numel() == 4);
    REQUIRE(s[3] == 9);
    IndexTensor d = IndexTensor::arange(10, 0, -3);  // 10 7 4 1
    REQUIRE(d.numel() == 4);
    REQUIRE(d[3] == 1);
    REQUIRE(IndexTensor::arange(5, 5).numel() == 0);
    // Extreme bounds: end - start does not fit in int64, yet the count is exact.
    const std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
    IndexTensor e = IndexTensor::arange(lo, hi, hi);  // lo, lo + hi = -1, -1 + hi = hi - 1
    REQUIRE(e.numel() == 3);
    REQUIRE(e[1] == -1);
    REQUIRE(e[2] == hi - 1);

    REQUIRE_THROWS_AS(IndexTensor::arange(0, 5, 0), ValueError);
    REQUIRE_THROWS_WITH(IndexTensor::arange(0, 5, 0), Contains("step must be non-zero"));
    REQUIRE_THROWS_AS(IndexTensor::arange(5, 0), ValueError);  // as torch: inconsistent with the step's sign
    REQUIRE_THROWS_AS(IndexTensor::arange(-3), ValueError);
    REQUIRE_THROWS_WITH(IndexTensor::arange(0, 5, -1), Contains("inconsistent"));
    REQUIRE_THROWS_AS(IndexTensor::arange(lo, hi), ValueError);  // 2^64 - 1 values: cannot be held
    REQUIRE_THROWS_WITH(IndexTensor::arange(lo, hi), Contains("more than memory can address"));
}

// arange(end) counted ceil((end - start) / step) values in a double and cast it to size_t
// unchecked: arange(1e30) (a double past SIZE_MAX, undefined behaviour) silently gave an EMPTY
// tensor, and arange(4.6e18) asked malloc for 2^64 bytes (an ASan abort). Bounded before the cast.
TEST_CASE("hostile: float arange refuses a count past the element limit", "[hostile][regression]") {
    CHECK_THAT(message_of<ValueError>([] { arange(real(1e30)); }), Contains("arange"));
    CHECK_THAT(message_of<ValueError>([] { arange(real(4.6e18)); }), Contains("arange"));
    CHECK_THAT(message_of<ValueError>([] { arange(0, 1, real(1e-30)); }), Contains("arange"));
    require_values(arange(real(3)), Tensor({0, 1, 2}));
    require_values(arange(1, 2, real(0.25)), Tensor({1, 1.25, 1.5, 1.75}));
    CHECK(arange(real(-3)).numel() == 0);  // an empty range, as before
}

// ---- bug 1 ---------------------------------------------------------------------------------------
// zeros({0, 2^62, 4}) holds no element, but xtensor's signed strides (2^62 · 4 = 2^64) overflow.
TEST_CASE("bug 1: a zero size does not hide an overflowing shape", "[reliability][bug1][regression]") {
    REQUIRE_THROWS_AS(zeros({0, k2p62, 4}), ValueError);
    REQUIRE_THROWS_WITH(zeros({0, k2p62, 4}), Contains("zeros") && Contains("(0, 4611686018427387904, 4)"));
    REQUIRE_THROWS_AS(randn({k2p62, 4, 0}), ValueError);
    REQUIRE_THROWS_WITH(one_hot(IndexTensor(IndexArray(ArrayShape{0, 5})), k2p62), Contains("one_hot"));
    REQUIRE_THROWS_AS(zeros({0}).reshape({0, std::int64_t{1} << 62, 4}), ValueError);
    // An empty tensor with large but representable sizes is still fine.
    REQUIRE(zeros({0, std::size_t{1} << 40, 4}).numel() == 0);
    REQUIRE(one_hot(IndexTensor(IndexArray(ArrayShape{0, 5})), 1000).shape() == Shape{0, 5, 1000});
    REQUIRE_THROWS_WITH(one_hot(IndexTensor{0}, -1), Contains("one_hot") && Contains("-1"));
}

// ---- bug 7: the generator from several threads -------------------------------------------------------
// Single-threaded sequences are unchanged bit for bit (examples and tests depend on them): the
// first values of randn after manual_seed(123), recorded before the generator gained its lock.
TEST_CASE("bug 7: manual_seed sequences are unchanged", "[reliability][bug7][regression]") {
    manual_seed(123);
    const Tensor a = randn({4});
    const Tensor u = rand({2});
    const IndexTensor k = randint(0, 1000, {3});
    const std::vector<real> expect_a = {0.557098448f, -1.85901225f, 0.0610234775f, 0.113174692f};
    const std::vector<real> expect_u = {0.192407548f, 0.195140064f};
    const std::vector<std::int64_t> expect_k = {950, 290, 819};
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(a.data()(i) == expect_a[i]);
    for (std::size_t i = 0; i < 2; ++i) REQUIRE(u.data()(i) == expect_u[i]);
    for (std::size_t i = 0; i < 3; ++i) REQUIRE(k.data()(i) == expect_k[i]);
}

TEST_CASE("generator_text reads back to the same generator, and only its exact text does", "[tensor][random]") {
    std::mt19937_64 g(7);
    g.discard(5);
    const std::string text = generator_text(g);
    const std::optional<std::mt19937_64> back = generator_from_text(text);
    REQUIRE(back.has_value());
    CHECK(*back == g);
    std::mt19937_64 copy = *back;
    CHECK(copy() == g());  // the next draws agree
    CHECK_FALSE(generator_from_text("").has_value());
    CHECK_FALSE(generator_from_text(text + " 5").has_value());   // trailing text
    CHECK_FALSE(generator_from_text("+" + text).has_value());    // a '+' operator>> would take
    CHECK_FALSE(generator_from_text(" " + text).has_value());    // a space it would skip
    CHECK_FALSE(generator_from_text(text.substr(0, 100)).has_value());
}
