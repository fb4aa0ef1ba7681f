// tests/test_core_ops.cpp — values of the attention chapter's core ops (core/slicing.cpp,
// core/masking.cpp, core/math_ops.cpp, IndexTensor::arange): hand-computed numbers, PyTorch's
// numbers, and the errors thrown for hostile input.
//
// PyTorch values come from tests/reference/make_core_ops_reference.py (torch 1.13, float64),
// which wrote tests/reference/core_ops_reference.hpp; this file builds the same inputs from that
// header, so it never needs torch. Float32 here, so PyTorch values are compared to 1e-5.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/ops.hpp"
#include "reference/core_ops_reference.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

const real inf = std::numeric_limits<real>::infinity();

// The reference tensor `name` from core_ops_reference.hpp, in float32.
Tensor torch_ref(const std::string& name, bool requires_grad = false) {
    for (const auto& e : core_ops_reference::entries()) {
        if (name != e.name) continue;
        Array a(e.shape);
        for (std::size_t i = 0; i < e.values.size(); ++i) a.data()[i] = static_cast<real>(e.values[i]);
        return from_array(std::move(a), requires_grad);
    }
    FAIL("no reference tensor named " << name);
    return Tensor();
}

// Exact comparison that treats -inf == -inf as equal (require_values' Approx would not).
void require_same_with_inf(const Tensor& t, const Tensor& expected) {
    REQUIRE(t.shape() == expected.shape());
    for (std::size_t i = 0; i < t.numel(); ++i) {
        const real a = t.data().data()[i], b = expected.data().data()[i];
        INFO("flat element " << i);
        if (std::isinf(b)) REQUIRE(a == b);
        else REQUIRE(a == Approx(b).epsilon(1e-5).margin(1e-5));
    }
}

}  // namespace

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

// ==== masked_fill / tril / triu / eq / ne ===========================================================

TEST_CASE("masked_fill - by hand with a broadcast row mask", "[masking]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor mask({0, 1, 0});  // (3,) broadcasts over the 2 rows
    Tensor y = masked_fill(x, mask, -inf);
    REQUIRE(y.shape() == Shape{2, 3});
    REQUIRE(y.at({0, 0}) == 1);
    REQUIRE(y.at({0, 1}) == -inf);
    REQUIRE(y.at({1, 1}) == -inf);
    REQUIRE(y.at({1, 2}) == 6);
    // dL/dx = 0 at the filled entries, and the mask gets nothing (it is not an input of the graph).
    masked_fill(x, mask, 0.0).sum().backward();
    require_values(x.grad(), Tensor({{1, 0, 1}, {1, 0, 1}}));
    REQUIRE(x.masked_fill(mask, 9).at({1, 1}) == 9);
}

TEST_CASE("masked_fill - values and gradients match PyTorch", "[masking][torch]") {
    Tensor x = torch_ref("masked_fill.x", true), w = torch_ref("masked_fill.w");
    for (const std::string tag : {"a", "b"}) {
        INFO("mask " << tag);
        Tensor mask = torch_ref("masked_fill.mask_" + tag);
        const real value = tag == "a" ? -inf : 7.5;
        x.reset_grad();
        Tensor y = masked_fill(x, mask, value);
        require_same_with_inf(y, torch_ref("masked_fill.y_" + tag));
        (masked_fill(y, mask, 0.0) * w).sum().backward();
        require_values(x.grad(), torch_ref("masked_fill.dx_" + tag));
    }
    // The attention pattern: softmax over -inf-masked scores gives the future weight exactly 0.
    x.reset_grad();
    Tensor p = softmax(masked_fill(x, torch_ref("masked_fill.mask_a"), -inf), -1);
    require_values(p, torch_ref("masked_fill.softmax_a"));
    REQUIRE(p.at({0, 0, 3}) == 0);
    (p * w).sum().backward();
    require_values(x.grad(), torch_ref("masked_fill.softmax_dx_a"));
}

TEST_CASE("masked_fill - a mask that does not broadcast to x throws", "[masking][errors]") {
    Tensor x = zeros({2, 3});
    REQUIRE_THROWS_AS(masked_fill(x, zeros({2}), 1), ValueError);
    REQUIRE_THROWS_WITH(masked_fill(x, zeros({2}), 1),
                        Contains("masked_fill") && Contains("(2)") && Contains("(2, 3)"));
    REQUIRE_THROWS_AS(masked_fill(x, zeros({4, 2, 3}), 1), ValueError);  // larger than x
    REQUIRE_THROWS_AS(masked_fill(x, zeros({3, 3}), 1), ValueError);
    REQUIRE_THROWS_AS(masked_fill(x, Tensor(), 1), ValueError);
}

TEST_CASE("tril and triu - by hand and against PyTorch with offsets", "[masking][torch]") {
    Tensor m({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
    require_values(tril(m), Tensor({{1, 0, 0}, {4, 5, 0}, {7, 8, 9}}));
    require_values(triu(m, 1), Tensor({{0, 2, 3}, {0, 0, 6}, {0, 0, 0}}));
    require_values(m.tril(-1), Tensor({{0, 0, 0}, {4, 0, 0}, {7, 8, 0}}));
    // The causal mask: 1 above the diagonal (the future), 0 on and below it.
    require_values(triu(ones({3, 3}), 1), Tensor({{0, 1, 1}, {0, 0, 1}, {0, 0, 0}}));
    Tensor x = torch_ref("tri.x");  // (2, 3, 4): batch dims are carried along
    for (std::int64_t k : {-1, 0, 2}) {
        INFO("k = " << k);
        require_values(tril(x, k), torch_ref("tri.tril_" + std::to_string(k)));
        require_values(triu(x, k), torch_ref("tri.triu_" + std::to_string(k)));
    }
    require_values(tril(x, -5), zeros({2, 3, 4}));  // offsets past the matrix are fine
    require_values(triu(x, -5), x);
    // Differentiable: the gradient is the kept pattern.
    Tensor leaf_m = ones({2, 2}, true);
    triu(leaf_m).sum().backward();
    require_values(leaf_m.grad(), Tensor({{1, 1}, {0, 1}}));
    REQUIRE_THROWS_AS(tril(zeros({3})), ValueError);
    REQUIRE_THROWS_WITH(triu(zeros({3})), Contains("triu") && Contains("at least 2 dims") && Contains("(3)"));
}

TEST_CASE("eq and ne - 0/1 tensors without gradient", "[masking]") {
    Tensor a({{0, 2, 0}, {1, 0, -0.0}}, true);
    Tensor e = eq(a, 0), n = ne(a, 0);
    require_values(e, Tensor({{1, 0, 1}, {0, 1, 1}}));  // -0 == 0
    require_values(n, Tensor({{0, 1, 0}, {1, 0, 0}}));
    REQUIRE_FALSE(e.requires_grad());
    REQUIRE_FALSE(n.requires_grad());
    const real nan = std::numeric_limits<real>::quiet_NaN();
    require_values(eq(Tensor({nan, 1}), nan), Tensor({0, 0}));  // NaN equals nothing
    require_values(ne(Tensor({nan, 1}), 1), Tensor({1, 0}));
    // A learner's mask from data, no xtensor code: fill where a is 0.
    require_values(masked_fill(a, eq(a, 0), -1).detach(), Tensor({{-1, 2, -1}, {1, -1, -1}}));
}

// ==== sqrt / rsqrt / var =============================================================================

TEST_CASE("sqrt and rsqrt - by hand and against PyTorch", "[math][torch]") {
    require_values(sqrt(Tensor({4, 9, 0.25})), Tensor({2, 3, 0.5}));
    require_values(Tensor({4, 0.25}).rsqrt(), Tensor({0.5, 2}));
    REQUIRE(rsqrt(Tensor({0})).item() == inf);  // as PyTorch
    REQUIRE(std::isnan(sqrt(Tensor({-1})).item()));
    for (const std::string name : {"sqrt", "rsqrt"}) {
        INFO(name);
        Tensor x = torch_ref("root.x", true);
        Tensor y = name == "sqrt" ? x.sqrt() : x.rsqrt();
        require_values(y, torch_ref("root." + name + "_y"));
        (y * torch_ref("root.w")).sum().backward();
        require_values(x.grad(), torch_ref("root." + name + "_dx"));
    }
    // d√x/dx at 4 is 1/(2·2) = 0.25; d(1/√x)/dx at 4 is -1/2 · 4^(-3/2) = -1/16
    Tensor x({4.0}, true);
    sqrt(x).sum().backward();
    REQUIRE(x.grad().item() == Approx(0.25));
    x.reset_grad();
    rsqrt(x).sum().backward();
    REQUIRE(x.grad().item() == Approx(-0.0625));
}

TEST_CASE("var - by hand and against PyTorch with unbiased and keepdim", "[math][torch]") {
    // {1, 2, 3, 4}: mean 2.5, Σ(x - mean)² = 2.25 + 0.25 + 0.25 + 2.25 = 5: unbiased 5/3, biased 5/4
    Tensor r({{1, 2, 3, 4}}, true);
    REQUIRE(var(r, 1).item() == Approx(5.0 / 3));
    REQUIRE(r.var(1, false, false).item() == Approx(1.25));
    REQUIRE(var(r, 1, true).shape() == Shape{1, 1});
    // dL/dx = 2 (x - mean) / 3 = {-1, -1/3, 1/3, 1}
    var(r, -1).sum().backward();
    require_values(r.grad(), Tensor({{-1, -1.0 / 3, 1.0 / 3, 1}}));

    Tensor x = torch_ref("var.x", true);  // (3, 4) with mean about 100: the two-pass sum keeps precision
    for (bool unbiased : {true, false}) {
        const std::string tag = unbiased ? "unbiased" : "biased";
        INFO(tag);
        x.reset_grad();
        Tensor y1 = var(x, 1, false, unbiased);
        require_values(y1, torch_ref("var.y1_" + tag));
        (y1 * torch_ref("var.w1")).sum().backward();
        require_values(x.grad(), torch_ref("var.dx1_" + tag));
        x.reset_grad();
        Tensor y0 = var(x, 0, true, unbiased);
        require_values(y0, torch_ref("var.y0_" + tag));
        (y0 * torch_ref("var.w0")).sum().backward();
        require_values(x.grad(), torch_ref("var.dx0_" + tag));
    }
}

TEST_CASE("var - one element gives NaN when unbiased as in PyTorch 1.13", "[math]") {
    Tensor x({{3.0}}, true);
    Tensor y = var(x, 1);  // divisor N - 1 = 0: 0/0
    REQUIRE(std::isnan(y.item()));
    y.sum().backward();
    REQUIRE(std::isnan(x.grad().item()));  // torch 1.13 gives NaN too
    REQUIRE(var(x, 1, false, false).item() == 0);  // biased: 0/1
    REQUIRE(std::isnan(var(zeros({2, 0}), 1).data()(0)));  // an empty dim: NaN, as PyTorch
    REQUIRE_THROWS_AS(var(x, 2), ValueError);
    REQUIRE_THROWS_AS(var(Tensor(1.0), 0), ValueError);
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
