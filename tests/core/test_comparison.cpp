// tests/core/test_comparison.cpp — eq ne lt le gt ge, allclose and equal of core/comparison.cpp
// (float32), against PyTorch (tests/reference/make_comparison_reference.py): NaN, ±inf, -0,
// broadcasting (2, 1) against (3,), tolerances met and missed by a hair; and printing an Array.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

// Included on purpose: with xtensor's printing in sight too, `os << array` must still compile and
// pick xgrad's operator<< (an exact match beats xio.hpp's template).
#include <xtensor/xio.hpp>

#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

// ---- pasted from tests/reference/make_comparison_reference.py (torch 1.13, float32) -------------
// cmp_x: shape (10,)
const std::vector<double> cmp_x = {0, -0.0, 1, kNaN, kInf, -kInf, 2.5, -3, kNaN, kInf};
// cmp_y: shape (10,)
const std::vector<double> cmp_y = {-0.0, 0, 1.5, kNaN, kInf, kInf, 2.5, kNaN, 1, 1.00000002e+30};
// cmp_xy: one row per op (eq ne lt le gt ge), each of shape (10,)
const std::vector<std::vector<double>> cmp_xy = {
    {1, 1, 0, 0, 1, 0, 1, 0, 0, 0},
    {0, 0, 1, 1, 0, 1, 0, 1, 1, 1},
    {0, 0, 1, 0, 0, 1, 0, 0, 0, 0},
    {1, 1, 1, 0, 1, 1, 1, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
    {1, 1, 0, 0, 1, 0, 1, 0, 0, 1},
};
// cmp_a: shape (2, 1)
const std::vector<double> cmp_a = {1, kNaN};
// cmp_b: shape (3,)
const std::vector<double> cmp_b = {0.5, 1, kInf};
// cmp_ab: one row per op (eq ne lt le gt ge), each of shape (2, 3)
const std::vector<std::vector<double>> cmp_ab = {
    {0, 1, 0, 0, 0, 0},
    {1, 0, 1, 1, 1, 1},
    {0, 0, 1, 0, 0, 0},
    {0, 1, 1, 0, 0, 0},
    {1, 0, 0, 0, 0, 0},
    {1, 1, 0, 0, 0, 0},
};
// cmp_x_2p5: one row per op (eq ne lt le gt ge), each of shape (10,)
const std::vector<std::vector<double>> cmp_x_2p5 = {
    {0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
    {1, 1, 1, 1, 1, 1, 0, 1, 1, 1},
    {1, 1, 1, 0, 0, 1, 0, 1, 0, 0},
    {1, 1, 1, 0, 0, 1, 1, 1, 0, 0},
    {0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
    {0, 0, 0, 0, 1, 0, 1, 0, 0, 1},
};
// cmp_x_inf: one row per op (eq ne lt le gt ge), each of shape (10,)
const std::vector<std::vector<double>> cmp_x_inf = {
    {0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
    {1, 1, 1, 1, 0, 1, 1, 1, 1, 0},
    {1, 1, 1, 0, 0, 1, 1, 1, 0, 0},
    {1, 1, 1, 0, 1, 1, 1, 1, 0, 1},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
};
// cmp_x_nan: one row per op (eq ne lt le gt ge), each of shape (10,)
const std::vector<std::vector<double>> cmp_x_nan = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};
// close_p: shape (15,)
const std::vector<double> close_p = {1.00000894, 1.00001097, 100.0009, 100.001099, 8.99999986e-09, 1.1e-08, -1.00000894, -1.00001097, kNaN, kNaN, kInf, -kInf, kInf, kInf, 3.39999995e+38};
// close_q: shape (15,)
const std::vector<double> close_q = {1, 1, 100, 100, 0, 0, -1, -1, kNaN, 1, kInf, -kInf, -kInf, 3.39999995e+38, kInf};
// isclose_pq: shape (15,)
const std::vector<double> isclose_pq = {1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0};
// isclose_pq_equal_nan: shape (15,)
const std::vector<double> isclose_pq_equal_nan = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0};
// allclose(p, q) = False; allclose(p[:8:2], q[:8:2]) = True
// allclose(2, 4, 0.5, 0) = True; allclose(4, 2, 0.5, 0) = False
// allclose(r (2, 1), s (3,)) = False; allclose(r[:1], s) = True
// allclose of two empty (0,) tensors = True
// equal(x, clone of x) = False   (x holds NaN)
// equal(x[:3], clone of x[:3]) = True   (0, -0, 1)
// equal(x[:2], y[:2]) = True   (0, -0 against -0, 0)
// equal((3,), (1, 3) of the same values) = False
// equal(int64 [1, 2, 3], [1, 2, 3]) = True; equal([1, 2, 3], [1, 2, 4]) = False

// ---- end of the pasted values ----------------------------------------------------------------------

// The six comparisons in the script's order (eq ne lt le gt ge), each in its two forms.
struct Comparison {
    const char* name;
    Tensor (*tensors)(const Tensor&, const Tensor&);
    Tensor (*number)(const Tensor&, real);
};
const std::vector<Comparison> kComparisons = {
    {"eq", eq, eq}, {"ne", ne, ne}, {"lt", lt, lt}, {"le", le, le}, {"gt", gt, gt}, {"ge", ge, ge}};

// y holds exactly the 0/1 values `expected` (flat) in `shape`, and is a constant.
void require_mask(const Tensor& y, const std::vector<double>& expected, const Shape& shape) {
    REQUIRE(bits_equal(y, from_values(expected, shape)));
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
}

// allclose of the one-element pair (p[i], q[i]).
bool close_at(std::size_t i, bool equal_nan) {
    return allclose(from_values({close_p[i]}, {1}), from_values({close_q[i]}, {1}), 1e-5, 1e-8, equal_nan);
}

}  // namespace

// ==== eq ne lt le gt ge =============================================================================

TEST_CASE("comparisons - same shape, with NaN, inf and -0, against PyTorch", "[comparison]") {
    const Tensor x = from_values(cmp_x, {10}, /*requires_grad=*/true), y = from_values(cmp_y, {10});
    for (std::size_t k = 0; k < kComparisons.size(); ++k) {
        INFO(kComparisons[k].name);
        require_mask(kComparisons[k].tensors(x, y), cmp_xy[k], {10});
    }
}

TEST_CASE("comparisons - broadcast (2, 1) against (3,) gives (2, 3), against PyTorch", "[comparison]") {
    const Tensor a = from_values(cmp_a, {2, 1}), b = from_values(cmp_b, {3});
    for (std::size_t k = 0; k < kComparisons.size(); ++k) {
        INFO(kComparisons[k].name);
        require_mask(kComparisons[k].tensors(a, b), cmp_ab[k], {2, 3});
    }
}

TEST_CASE("comparisons - against a number (2.5, inf, NaN), against PyTorch", "[comparison]") {
    const Tensor x = from_values(cmp_x, {10}, /*requires_grad=*/true);
    const std::vector<std::pair<real, const std::vector<std::vector<double>>*>> cases = {
        {real(2.5), &cmp_x_2p5}, {kInf, &cmp_x_inf}, {kNaN, &cmp_x_nan}};
    for (const auto& [v, expected] : cases) {
        for (std::size_t k = 0; k < kComparisons.size(); ++k) {
            INFO(kComparisons[k].name << " against " << v);
            require_mask(kComparisons[k].number(x, v), (*expected)[k], {10});
        }
    }
}

TEST_CASE("eq and ne - 0/1 tensors without gradient", "[comparison]") {
    Tensor a({{0, 2, 0}, {1, 0, -0.0}}, true);
    Tensor e = eq(a, 0), n = ne(a, 0);
    require_values(e, Tensor({{1, 0, 1}, {0, 1, 1}}));  // -0 == 0
    require_values(n, Tensor({{0, 1, 0}, {1, 0, 0}}));
    REQUIRE_FALSE(e.requires_grad());
    REQUIRE_FALSE(n.requires_grad());
    require_values(eq(Tensor({kNaN, 1}), kNaN), Tensor({0, 0}));  // NaN equals nothing
    require_values(ne(Tensor({kNaN, 1}), 1), Tensor({1, 0}));
    // A learner's mask from data, no xtensor code: fill where a is 0.
    require_values(masked_fill(a, eq(a, 0), -1).detach(), Tensor({{-1, 2, -1}, {1, -1, -1}}));
    // A count: how many predictions agree with the targets.
    REQUIRE(sum(eq(Tensor({1, 2, 3, 4}), Tensor({1, 0, 3, 0}))).item() == 2);
}

TEST_CASE("comparisons - refuse undefined tensors and shapes that do not broadcast", "[comparison]") {
    REQUIRE_THROWS_WITH(lt(zeros({2, 3}), zeros({4})), Contains("lt") && Contains("(2, 3)") && Contains("(4)"));
    REQUIRE_THROWS_AS(ge(zeros({2}), zeros({3, 1, 5})), ValueError);
    REQUIRE_THROWS_WITH(eq(Tensor(), zeros({2})), Contains("eq") && Contains("undefined"));
    REQUIRE_THROWS_WITH(ne(zeros({2}), Tensor()), Contains("ne") && Contains("b is an undefined"));
    REQUIRE_THROWS_WITH(gt(Tensor(), real(1)), Contains("gt") && Contains("undefined"));
    require_mask(le(zeros({0, 3}), zeros({1, 3})), {}, {0, 3});  // empty broadcasts like any size
}

// ==== allclose / equal ==============================================================================

TEST_CASE("allclose - each pair just inside and just outside the tolerance, against PyTorch", "[comparison]") {
    REQUIRE(close_p.size() == isclose_pq.size());
    for (std::size_t i = 0; i < close_p.size(); ++i) {
        INFO("pair " << i << ": " << close_p[i] << " against " << close_q[i]);
        REQUIRE(close_at(i, /*equal_nan=*/false) == (isclose_pq[i] == 1));
        REQUIRE(close_at(i, /*equal_nan=*/true) == (isclose_pq_equal_nan[i] == 1));
    }
}

TEST_CASE("allclose - whole tensors, broadcasting, asymmetry and empty, against PyTorch", "[comparison]") {
    const Shape n(1, close_p.size());  // (15,)
    REQUIRE_FALSE(allclose(from_values(close_p, n), from_values(close_q, n)));
    REQUIRE(allclose(from_values({close_p[0], close_p[2], close_p[4], close_p[6]}, {4}),
                     from_values({close_q[0], close_q[2], close_q[4], close_q[6]}, {4})));
    // |a - b| <= atol + rtol·|b|: the tolerance scales with b only.
    const Tensor two = from_values({2}, {1}), four = from_values({4}, {1});
    REQUIRE(allclose(two, four, 0.5, 0));
    REQUIRE_FALSE(allclose(four, two, 0.5, 0));
    const Tensor s({1.000005, 1.0, 0.999995});
    REQUIRE_FALSE(allclose(Tensor({{1}, {2}}), s));  // (2, 1) against (3,): the second row is far
    REQUIRE(allclose(Tensor({{1}}), s));
    REQUIRE(allclose(zeros({0}), zeros({0})));
}

TEST_CASE("allclose - refuses negative tolerances, undefined tensors and shapes that do not broadcast", "[comparison]") {
    REQUIRE_THROWS_WITH(allclose(zeros({2}), zeros({2}), -1e-5),
                        Contains("allclose") && Contains("rtol=-1e-05") && Contains("(2)"));
    REQUIRE_THROWS_WITH(allclose(zeros({2}), zeros({2}), 1e-5, -1), Contains("allclose") && Contains("atol=-1"));
    REQUIRE_THROWS_WITH(allclose(zeros({2, 3}), zeros({2})), Contains("allclose") && Contains("(2, 3)"));
    REQUIRE_THROWS_WITH(allclose(Tensor(), zeros({2})), Contains("allclose") && Contains("undefined"));
}

TEST_CASE("equal - same shape and values - NaN is not equal to itself, against PyTorch", "[comparison]") {
    const Tensor x = from_values(cmp_x, {10}), y = from_values(cmp_y, {10});
    REQUIRE_FALSE(equal(x, x.detach()));                          // x holds NaN
    REQUIRE(equal(narrow(x, 0, 0, 3), narrow(x, 0, 0, 3)));       // 0, -0, 1
    REQUIRE(equal(narrow(x, 0, 0, 2), narrow(y, 0, 0, 2)));       // -0 == 0
    REQUIRE_FALSE(equal(narrow(x, 0, 0, 3), narrow(x, 0, 0, 3).reshape({1, 3})));  // shapes differ
    REQUIRE(equal(IndexTensor{1, 2, 3}, IndexTensor{1, 2, 3}));
    REQUIRE_FALSE(equal(IndexTensor{1, 2, 3}, IndexTensor{1, 2, 4}));
    REQUIRE_FALSE(equal(IndexTensor{1, 2, 3}, IndexTensor{1, 2, 3}.reshape({1, 3})));
    REQUIRE(equal(zeros({0}), zeros({0})));
    REQUIRE_THROWS_WITH(equal(x, Tensor()), Contains("equal") && Contains("undefined"));
}

// ==== printing an Array =============================================================================

TEST_CASE("operator<< prints an Array as the values under its Tensor's header", "[comparison][tensor]") {
    // Declared by xgrad for these exact types (these lines do not compile otherwise), so the text
    // below comes from xgrad's operator<<, not from xio.hpp's template included above.
    [[maybe_unused]] std::ostream& (*print_array)(std::ostream&, const Array&) = xgrad::operator<<;
    [[maybe_unused]] std::ostream& (*print_ids)(std::ostream&, const IndexArray&) = xgrad::operator<<;

    const Tensor t({{1, 2.5, -3}, {4, 5, 6}});
    std::ostringstream as_tensor, as_array;
    as_tensor << t;
    as_array << t.data();
    REQUIRE(as_array.str() == "{{ 1. ,  2.5, -3. },\n { 4. ,  5. ,  6. }}");
    REQUIRE(as_tensor.str() == "Tensor(shape=(2, 3))\n" + as_array.str());

    const IndexTensor ids{{0, 7}, {3, 1}};
    std::ostringstream ids_as_tensor, ids_as_array;
    ids_as_tensor << ids;
    ids_as_array << ids.data();
    REQUIRE(ids_as_array.str() == "{{0, 7},\n {3, 1}}");
    REQUIRE(ids_as_tensor.str() == "IndexTensor(shape=(2, 2))\n" + ids_as_array.str());
}

TEST_CASE("eq and ne of IndexTensors compare IDs exactly and give the accuracy", "[comparison]") {
    const IndexTensor pred{{2, 0, 1}, {1, 1, 0}}, target{{2, 1, 1}, {0, 1, 0}};
    const Tensor hits = eq(pred, target);
    require_values(hits, Tensor({{1, 0, 1}, {0, 1, 1}}));
    REQUIRE_FALSE(hits.requires_grad());
    REQUIRE(hits.mean().item() == Approx(4.0 / 6.0));
    require_values(ne(pred, target), Tensor({{0, 1, 0}, {1, 0, 0}}));
    // 2^53 + 1 and 2^53 are different IDs (equal once rounded to a double, and to a float).
    const std::int64_t big = (std::int64_t{1} << 53) + 1;
    REQUIRE(eq(IndexTensor{big}, IndexTensor{big - 1}).item() == 0);
    require_values(eq(pred, IndexTensor{1}), Tensor({{0, 0, 1}, {1, 1, 0}}));  // broadcast
    REQUIRE_THROWS_WITH(eq(pred, IndexTensor{1, 2}), Contains("eq") && Contains("(2, 3)") && Contains("(2)"));
}

