// tests/test_ops.cpp — values and gradients of every core op, computed by hand (float32).
//
// Covers: add/sub/mul/div/neg with broadcasting and their summed-back gradients; the scalar
// variants; pow/exp/log/tanh/relu/sigmoid; sum/mean/max (all and along a dim, keepdim);
// reshape with -1; transpose/permute; concat; matmul (2-D, batched 3-D, (B,n,k)@(k,m),
// (1,n,k)@(B,k,m)); softmax/log_softmax on logits of 1e4 and with -inf entries, the fused
// softmax against softmax_composed;
// index_select's row scatter; one_hot @ E against index_select; and the errors of bad input
// (each names its op).
//
// Each gradient is checked by seeding backward with a gradient G whose entries differ, so a
// transposed or misplaced entry shows. Shapes in comments: (rows, cols).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmanipulation.hpp>

#include "core/blas.hpp"
#include "core/permute.hpp"
#include "core/ops.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::require_values;
using Catch::Matchers::Contains;

namespace {
constexpr real inf = std::numeric_limits<real>::infinity();

bool all_finite(const Tensor& t) {
    for (real v : t.data())
        if (!std::isfinite(v)) return false;
    return true;
}
}  // namespace

// ==== elementwise, broadcasting =======================================================================

TEST_CASE("add (2x3) + (3x): value - and b's gradient summed over rows", "[ops][broadcast]") {
    Tensor a({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor b({10, 20, 30}, true);
    Tensor y = a + b;
    require_values(y, {{11, 22, 33}, {14, 25, 36}});
    REQUIRE(y.grad_fn()->name == "add");
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1, 2, 3}, {4, 5, 6}});
    require_values(b.grad(), {5, 7, 9});
}

TEST_CASE("add of a 0-d scalar tensor broadcasts to every element", "[ops][broadcast]") {
    Tensor a({{1, 2}, {3, 4}}, true);
    Tensor s(10.0, true);
    Tensor y = s + a;
    require_values(y, {{11, 12}, {13, 14}});
    y.backward(Tensor({{1, 2}, {3, 4}}));
    REQUIRE(s.grad().shape() == Shape{});
    REQUIRE(s.grad().item() == 10.0f);
    require_values(a.grad(), {{1, 2}, {3, 4}});
}

TEST_CASE("sub (2x3) - (3x): b's gradient is minus the row sum", "[ops][broadcast]") {
    Tensor a({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor b({10, 20, 30}, true);
    Tensor y = a - b;
    require_values(y, {{-9, -18, -27}, {-6, -15, -24}});
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1, 2, 3}, {4, 5, 6}});
    require_values(b.grad(), {-5, -7, -9});
}

TEST_CASE("mul (2x1) * (1x3): an outer product - gradients summed back to (2x1) and (1x3)", "[ops][broadcast]") {
    Tensor a({{1}, {2}}, true);
    Tensor b({{3, 4, 5}}, true);
    Tensor y = a * b;
    require_values(y, {{3, 4, 5}, {6, 8, 10}});
    // dL/da[i] = Σ_j G[i,j] b[j];  dL/db[j] = Σ_i G[i,j] a[i]
    y.backward(Tensor({{1, 2, 3}, {4, 5, 6}}));
    require_values(a.grad(), {{1 * 3 + 2 * 4 + 3 * 5}, {4 * 3 + 5 * 4 + 6 * 5}});  // 26, 62
    require_values(b.grad(), {{1 + 4 * 2, 2 + 5 * 2, 3 + 6 * 2}});                  // 9, 12, 15
}

TEST_CASE("div (2x2) / (2x): dL/db = -Σ_rows g·a/b²", "[ops][broadcast]") {
    Tensor a({{2, 4}, {6, 8}}, true);
    Tensor b({1, 2}, true);
    Tensor y = a / b;
    require_values(y, {{2, 2}, {6, 4}});
    y.sum().backward();
    require_values(a.grad(), {{1, 0.5}, {1, 0.5}});
    require_values(b.grad(), {-(2 + 6) / 1.0, -(4 + 8) / 4.0});  // -8, -3
}

TEST_CASE("neg", "[ops]") {
    Tensor a({1, -2}, true);
    Tensor y = -a;
    require_values(y, {-1, 2});
    y.backward(Tensor({3, 4}));
    require_values(a.grad(), {-3, -4});
}

TEST_CASE("scalar variants: a+s - s+a - a-s - s-a - a*s - s*a - a/s - s/a", "[ops][scalar]") {
    Tensor a({1, 2, 4}, true);
    require_values(a + 2, {3, 4, 6});
    require_values(2 + a, {3, 4, 6});
    require_values(a - 2, {-1, 0, 2});
    require_values(2 - a, {1, 0, -2});
    require_values(a * 3, {3, 6, 12});
    require_values(3 * a, {3, 6, 12});
    require_values(a / 4, {0.25, 0.5, 1});
    require_values(8 / a, {8, 4, 2});

    auto grad_of = [&](const Tensor& y) {
        a.reset_grad();
        y.sum().backward();
        return a.grad();
    };
    require_values(grad_of(a + 2), {1, 1, 1});
    require_values(grad_of(2 - a), {-1, -1, -1});
    require_values(grad_of(a * 3), {3, 3, 3});
    require_values(grad_of(a / 4), {0.25, 0.25, 0.25});
    require_values(grad_of(8 / a), {-8, -2, -0.5});  // -8 / a²
}

// ==== pointwise =========================================================================================

TEST_CASE("pow: integer and fractional exponents", "[ops][pointwise]") {
    Tensor x({1, 2, 3}, true);
    Tensor y = x.pow(3);
    require_values(y, {1, 8, 27});
    y.sum().backward();
    require_values(x.grad(), {3, 12, 27});  // 3x²

    Tensor r({4, 9}, true);
    Tensor s = pow(r, 0.5);
    require_values(s, {2, 3});
    s.sum().backward();
    require_values(r.grad(), {0.25, 1.0 / 6});  // 0.5 / √x
}

TEST_CASE("pow with exponent 0: y = 1 and the gradient is exactly 0 - also at x = 0", "[ops][pointwise]") {
    Tensor x({0, 2, -3}, true);
    Tensor y = x.pow(0);
    require_values(y, {1, 1, 1});
    y.sum().backward();
    REQUIRE(all_finite(x.grad()));
    require_values(x.grad(), {0, 0, 0});

    Tensor z({0, 2}, true);  // x¹ at 0: 1 · 0⁰ = 1
    z.pow(1).sum().backward();
    require_values(z.grad(), {1, 1});
}

TEST_CASE("exp and log", "[ops][pointwise]") {
    const real e = std::exp(real(1));
    Tensor x({0, 1, -1}, true);
    Tensor y = x.exp();
    require_values(y, {1, e, 1 / e});
    y.sum().backward();
    require_values(x.grad(), {1, e, 1 / e});

    Tensor p({1, e, 0.5}, true);
    Tensor l = p.log();
    require_values(l, {0, 1, std::log(real(0.5))});
    l.sum().backward();
    require_values(p.grad(), {1, 1 / e, 2});
}

TEST_CASE("tanh: value and 1 - tanh²", "[ops][pointwise]") {
    Tensor x({0, 0.5, -2}, true);
    Tensor y = x.tanh();
    require_values(y, {0, 0.46211715726, -0.96402758008});
    y.sum().backward();
    require_values(x.grad(), {1, 0.78644773296, 0.07065082485});
}

TEST_CASE("relu: gradient 1 where x > 0 - else 0 (also at x = 0)", "[ops][pointwise]") {
    Tensor x({-1, 0, 2, 0.5}, true);
    Tensor y = x.relu();
    require_values(y, {0, 0, 2, 0.5});
    y.backward(Tensor({10, 20, 30, 40}));
    require_values(x.grad(), {0, 0, 30, 40});
}

TEST_CASE("sigmoid: values - y(1-y) - and no overflow at ±100", "[ops][pointwise]") {
    Tensor x({0, 2, -2, 100, -100}, true);
    Tensor y = x.sigmoid();
    REQUIRE(all_finite(y));
    require_values(y, {0.5, 0.88079707798, 0.11920292202, 1, 0});
    REQUIRE(y.at({4}) >= 0);
    y.sum().backward();
    REQUIRE(all_finite(x.grad()));
    require_values(x.grad(), {0.25, 0.10499358540, 0.10499358540, 0, 0});
}

// ==== reductions =========================================================================================

TEST_CASE("sum over all elements and along a dim - with keepdim", "[ops][reduce]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor total = x.sum();
    REQUIRE(total.shape() == Shape{});
    REQUIRE(total.item() == 21.0f);
    require_values(x.sum(0), {5, 7, 9});
    require_values(x.sum(1), {6, 15});
    require_values(x.sum(-1), {6, 15});
    require_values(x.sum(1, true), {{6}, {15}});
    require_values(x.sum(0, true), {{5, 7, 9}});

    x.sum(1).backward(Tensor({1, 2}));
    require_values(x.grad(), {{1, 1, 1}, {2, 2, 2}});
    x.reset_grad();
    x.sum(0, true).backward(Tensor({{1, 2, 3}}));
    require_values(x.grad(), {{1, 2, 3}, {1, 2, 3}});
}

TEST_CASE("sum along the middle dim of a (2x3x4) tensor", "[ops][reduce]") {
    // x[i, j, k] = 12i + 4j + k;  Σ_j = 36i + 12 + 3k
    Tensor x = arange(24).reshape({2, 3, 4});
    Tensor y = x.sum(1);
    require_values(y, {{12, 15, 18, 21}, {48, 51, 54, 57}});
    require_values(x.sum(-2, true), Tensor({{{12, 15, 18, 21}}, {{48, 51, 54, 57}}}));
}

TEST_CASE("sum of many floats is accumulated precisely", "[ops][reduce]") {
    // A float accumulator stops at 2^24 = 16,777,216; the exact sum is 2e7.
    Tensor x = ones({20000000});
    REQUIRE(x.sum().item() == 20000000.0f);
}

TEST_CASE("mean over all elements and along a dim", "[ops][reduce]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor m = x.mean();
    REQUIRE(m.item() == Approx(3.5));
    m.backward();
    require_values(x.grad(), {{1 / 6.0, 1 / 6.0, 1 / 6.0}, {1 / 6.0, 1 / 6.0, 1 / 6.0}});
    x.reset_grad();
    require_values(x.mean(0), {2.5, 3.5, 4.5});
    require_values(x.mean(1, true), {{2}, {5}});
    x.mean(0).backward(Tensor({2, 4, 6}));
    require_values(x.grad(), {{1, 2, 3}, {1, 2, 3}});
}

TEST_CASE("max over all elements: the gradient goes to the maximum only", "[ops][reduce]") {
    Tensor x({{1, 5, 3}, {4, 2, 0}}, true);
    Tensor m = x.max();
    REQUIRE(m.shape() == Shape{});
    REQUIRE(m.item() == 5.0f);
    (m * 3).backward();
    require_values(x.grad(), {{0, 3, 0}, {0, 0, 0}});
}

TEST_CASE("max along a dim - with keepdim - and argmax", "[ops][reduce]") {
    Tensor x({{1, 5, 3}, {4, 2, 0}}, true);
    require_values(x.max(1), {5, 4});
    require_values(x.max(0, true), {{4, 5, 3}});
    require_values(x.max(-1, true), {{5}, {4}});
    IndexTensor am = argmax(x, 1);
    REQUIRE(am.shape() == Shape{2});
    REQUIRE(am[0] == 1);
    REQUIRE(am[1] == 0);
    REQUIRE(argmax(x, 0, true).shape() == Shape{1, 3});

    x.max(1).backward(Tensor({1, 2}));
    require_values(x.grad(), {{0, 1, 0}, {2, 0, 0}});
    x.reset_grad();
    x.max(0, true).backward(Tensor({{10, 20, 30}}));
    require_values(x.grad(), {{0, 20, 30}, {10, 0, 0}});
}

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
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) REQUIRE(y.at({k, i, j}) == real(12 * i + 4 * j + k));
    // G[k,i,j] = 6k + 3i + j, so dL/dx[i,j,k] = G[k,i,j] = 6k + 3i + j.
    y.backward(arange(24).reshape({4, 2, 3}));
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) REQUIRE(x.grad().at({i, j, k}) == real(6 * k + 3 * i + j));
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

// ==== matmul ==============================================================================================

// core/blas.cpp routes some shapes differently (A·Bᵀ with K < 32 copies Bᵀ first): every
// route must give the plain triple loop's C = alpha·op(A)·op(B) + beta·C.
TEST_CASE("gemm: all four transpose cases and beta 0 or 1 equal the triple loop", "[ops][matmul][gemm]") {
    struct Case { std::size_t M, N, K; };
    for (const Case c : {Case{32, 200, 30}, Case{3, 5, 2}, Case{4, 7, 40}, Case{1, 1, 1}, Case{200, 64, 31}}) {
        for (int ta = 0; ta < 2; ++ta) {
            for (int tb = 0; tb < 2; ++tb) {
                for (real beta : {real(0), real(1)}) {
                    // op(A) (M, K), op(B) (K, N); stored as (K, M) or (N, K) when transposed
                    std::vector<real> A(c.M * c.K), B(c.K * c.N), C(c.M * c.N);
                    for (std::size_t i = 0; i < A.size(); ++i) A[i] = real(std::sin(0.7 * double(i) + 0.1));
                    for (std::size_t i = 0; i < B.size(); ++i) B[i] = real(std::cos(0.3 * double(i)));
                    for (std::size_t i = 0; i < C.size(); ++i) C[i] = real(0.5) - real(i % 3);
                    const auto a = [&](std::size_t m, std::size_t k) { return ta ? A[k * c.M + m] : A[m * c.K + k]; };
                    const auto b = [&](std::size_t k, std::size_t n) { return tb ? B[n * c.K + k] : B[k * c.N + n]; };
                    std::vector<double> want(c.M * c.N);
                    for (std::size_t m = 0; m < c.M; ++m)
                        for (std::size_t n = 0; n < c.N; ++n) {
                            double acc = 0;
                            for (std::size_t k = 0; k < c.K; ++k) acc += double(a(m, k)) * double(b(k, n));
                            want[m * c.N + n] = 2 * acc + double(beta) * double(C[m * c.N + n]);
                        }
                    gemm(ta, tb, c.M, c.N, c.K, 2, A.data(), ta ? c.M : c.K, B.data(), tb ? c.K : c.N, beta,
                         C.data(), c.N);
                    for (std::size_t i = 0; i < C.size(); ++i)
                        REQUIRE(double(C[i]) == Approx(want[i]).margin(1e-4).epsilon(1e-5));
                }
            }
        }
    }
}

TEST_CASE("matmul 2-D: values and dA = G Bᵀ - dB = Aᵀ G", "[ops][matmul]") {
    Tensor A({{1, 2}, {3, 4}}, true);
    Tensor B({{5, 6}, {7, 8}}, true);
    Tensor Y = matmul(A, B);
    require_values(Y, {{19, 22}, {43, 50}});
    Y.sum().backward();
    require_values(A.grad(), {{11, 15}, {11, 15}});  // row sums of B
    require_values(B.grad(), {{4, 4}, {6, 6}});      // column sums of A
}

TEST_CASE("matmul 2-D non-square (2x3) @ (3x1) with a general gradient", "[ops][matmul]") {
    Tensor A({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor B({{1}, {0}, {-1}}, true);
    Tensor Y = A.matmul(B);
    require_values(Y, {{-2}, {-2}});
    Y.backward(Tensor({{1}, {2}}));
    require_values(A.grad(), {{1, 0, -1}, {2, 0, -2}});
    require_values(B.grad(), {{1 + 8}, {2 + 10}, {3 + 12}});
}

TEST_CASE("matmul batched (2x2x2) @ (2x2x2): one product per batch", "[ops][matmul]") {
    Tensor A({{{1, 2}, {3, 4}}, {{1, 0}, {0, 1}}}, true);
    Tensor B({{{5, 6}, {7, 8}}, {{2, 0}, {0, 3}}}, true);
    Tensor Y = matmul(A, B);
    require_values(Y, {{{19, 22}, {43, 50}}, {{2, 0}, {0, 3}}});
    Y.sum().backward();
    require_values(A.grad(), {{{11, 15}, {11, 15}}, {{2, 3}, {2, 3}}});
    require_values(B.grad(), {{{4, 4}, {6, 6}}, {{1, 1}, {1, 1}}});
}

TEST_CASE("matmul (Bxnxk) @ (kxm): the right gradient is (kxm) - summed over the batch", "[ops][matmul]") {
    Tensor A({{{1, 2}, {3, 4}}, {{1, 0}, {0, 1}}}, true);
    Tensor W({{5, 6}, {7, 8}}, true);
    Tensor Y = matmul(A, W);
    REQUIRE(Y.shape() == Shape{2, 2, 2});
    require_values(Y, {{{19, 22}, {43, 50}}, {{5, 6}, {7, 8}}});
    Y.sum().backward();
    REQUIRE(W.grad().shape() == Shape{2, 2});
    require_values(W.grad(), {{4 + 1, 4 + 1}, {6 + 1, 6 + 1}});  // Σ_b column sums of A[b]
    require_values(A.grad(), {{{11, 15}, {11, 15}}, {{11, 15}, {11, 15}}});
}

TEST_CASE("matmul (1xnxk) @ (Bxkxm): the left operand broadcasts - its gradient sums over B", "[ops][matmul]") {
    Tensor A({{{1, 2}, {3, 4}}}, true);
    Tensor B({{{5, 6}, {7, 8}}, {{2, 0}, {0, 3}}}, true);
    Tensor Y = matmul(A, B);
    REQUIRE(Y.shape() == Shape{2, 2, 2});
    require_values(Y, {{{19, 22}, {43, 50}}, {{2, 6}, {6, 12}}});
    Y.sum().backward();
    REQUIRE(A.grad().shape() == Shape{1, 2, 2});
    require_values(A.grad(), {{{11 + 2, 15 + 3}, {11 + 2, 15 + 3}}});
    require_values(B.grad(), {{{4, 4}, {6, 6}}, {{4, 4}, {6, 6}}});
}

TEST_CASE("matmul (nxk) @ (Bxkxm): a 2-D left operand is shared by every batch", "[ops][matmul]") {
    Tensor A({{1, 2}, {3, 4}}, true);
    Tensor B({{{5, 6}, {7, 8}}, {{2, 0}, {0, 3}}}, true);
    Tensor Y = matmul(A, B);
    require_values(Y, {{{19, 22}, {43, 50}}, {{2, 6}, {6, 12}}});
    Y.sum().backward();
    require_values(A.grad(), {{13, 18}, {13, 18}});
    require_values(B.grad(), {{{4, 4}, {6, 6}}, {{4, 4}, {6, 6}}});
}

TEST_CASE("matmul with an empty inner dim gives zeros", "[ops][matmul]") {
    Tensor A = ones({2, 0}, true);
    Tensor B = ones({0, 3}, true);
    Tensor Y = matmul(A, B);
    require_values(Y, {{0, 0, 0}, {0, 0, 0}});
    Y.sum().backward();
    REQUIRE(A.grad().shape() == Shape{2, 0});
    REQUIRE(B.grad().shape() == Shape{0, 3});
    Tensor C = ones({2, 2, 0});
    require_values(matmul(C, ones({2, 0, 1})), {{{0}, {0}}, {{0}, {0}}});
}

// ==== softmax family ========================================================================================

TEST_CASE("softmax and log_softmax are finite for logits of 1e4", "[ops][softmax]") {
    Tensor x({{10000, 9999, 9998}, {-10000, 0, 10000}}, true);
    Tensor s = x.softmax(1);
    Tensor ls = x.log_softmax(1);
    REQUIRE(all_finite(s));
    REQUIRE(all_finite(ls));
    // softmax([0, -1, -2]) = e^-i / (1 + e^-1 + e^-2)
    require_values(s, {{0.66524096, 0.24472847, 0.09003057}, {0, 0, 1}});
    require_values(ls, {{-0.40760596, -1.40760596, -2.40760596}, {-20000, -10000, 0}}, 1e-4);
    require_values(s.sum(1), {1, 1});

    (s * Tensor({{1, 2, 3}, {1, 2, 3}})).sum().backward();
    REQUIRE(all_finite(x.grad()));
    // dL/dx_i = s_i (w_i - Σ_j s_j w_j)
    const real p0 = 0.66524096f, p1 = 0.24472847f, p2 = 0.09003057f, sw = p0 + 2 * p1 + 3 * p2;
    require_values(x.grad(), {{p0 * (1 - sw), p1 * (2 - sw), p2 * (3 - sw)}, {0, 0, 0}});
    x.reset_grad();
    ls.sum().backward();
    REQUIRE(all_finite(x.grad()));
}

TEST_CASE("softmax with -inf entries: zero probability and exactly zero gradient there", "[ops][softmax]") {
    Tensor x({{0, -inf, 0}, {1, 2, -inf}}, true);
    Tensor s = x.softmax(-1);
    REQUIRE(all_finite(s));
    require_values(s, {{0.5, 0, 0.5}, {0.26894142, 0.73105858, 0}});
    REQUIRE(s.at({0, 1}) == 0.0f);
    REQUIRE(s.at({1, 2}) == 0.0f);

    (s * Tensor({{1, 2, 3}, {1, 2, 3}})).sum().backward();
    REQUIRE(all_finite(x.grad()));
    REQUIRE(x.grad().at({0, 1}) == 0.0f);
    REQUIRE(x.grad().at({1, 2}) == 0.0f);
    // Row 0: Σ s w = 2;  row 1: Σ s w = 0.26894142 + 2·0.73105858 = 1.73105858.
    const real s1 = 0.26894142f, s2 = 0.73105858f, sw = s1 + 2 * s2;
    require_values(x.grad(), {{-0.5, 0, 0.5}, {s1 * (1 - sw), s2 * (2 - sw), 0}});
}

TEST_CASE("log_softmax with -inf entries: NLL gradient is softmax - onehot - exactly zero at -inf", "[ops][softmax]") {
    Tensor x({{0, -inf, 0}, {1, 2, -inf}}, true);
    Tensor ls = x.log_softmax(1);
    REQUIRE(ls.at({0, 1}) == -inf);
    REQUIRE(ls.at({0, 0}) == Approx(std::log(0.5)));
    REQUIRE(ls.at({1, 1}) == Approx(std::log(0.73105858)));
    // NLL of targets (0, 1): pick entries 0 and 4 of the flattened (2, 3) log-probabilities.
    Tensor picked = index_select(ls.reshape({-1}), 0, IndexTensor{0, 4});
    Tensor nll = -picked.sum();
    REQUIRE(std::isfinite(nll.item()));
    nll.backward();
    REQUIRE(all_finite(x.grad()));
    REQUIRE(x.grad().at({0, 1}) == 0.0f);
    REQUIRE(x.grad().at({1, 2}) == 0.0f);
    require_values(x.grad(), {{0.5 - 1, 0, 0.5}, {0.26894142, 0.73105858 - 1, 0}});
}

TEST_CASE("softmax along dim 0 normalises columns", "[ops][softmax]") {
    Tensor x({{0, 1}, {0, 3}});
    Tensor s = x.softmax(0);
    require_values(s, {{0.5, 0.11920292}, {0.5, 0.88079708}});
    require_values(s.sum(0), {1, 1});
}

// The fused softmax (core/softmax.cpp) against its oracle, softmax_composed, along every dim of a
// 3-D tensor, on rows longer than one SIMD register (37: 4 full registers of 8 and a tail of 5),
// with -inf entries: the values and the gradients for a G whose entries all differ.
TEST_CASE("fused softmax equals softmax_composed - values and gradients along each dim", "[ops][softmax]") {
    manual_seed(21);
    Tensor base = randn({3, 37, 5}) * 4;
    base.data().data()[7] = -inf;  // masked entries, as attention's causal mask makes them
    base.data().data()[200] = -inf;
    const Tensor G = randn({3, 37, 5});
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        Tensor xf = base.detach().requires_grad_(), xc = base.detach().requires_grad_();
        Tensor yf = softmax(xf, d), yc = softmax_composed(xc, d);
        require_values(yf, yc, 1e-6);
        yf.backward(G);
        yc.backward(G);
        require_values(xf.grad(), xc.grad(), 1e-5);
        REQUIRE(xf.grad().data().data()[7] == 0.0f);
        REQUIRE(yf.data().data()[200] == 0.0f);
    }
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
    for (std::size_t j = 0; j < 3; ++j) {
        REQUIRE(Eb.grad().at({2, j}) == 0.0f);  // row 2 was never selected
        REQUIRE(Eb.grad().at({3, j}) == 0.0f);
        REQUIRE(Eb.grad().at({4, j}) == Approx(G.at({0, j}) + G.at({2, j})));
    }
}

// ==== bad input ===================================================================================================

TEST_CASE("broadcast shape mismatches throw ValueError naming the op and both shapes", "[ops][errors]") {
    Tensor a = ones({2, 3}), b = ones({4});
    REQUIRE_THROWS_AS(add(a, b), ValueError);
    REQUIRE_THROWS_AS(add(a, b), std::invalid_argument);
    REQUIRE_THROWS_WITH(add(a, b), Contains("add") && Contains("(2, 3)") && Contains("(4)"));
    REQUIRE_THROWS_WITH(sub(a, b), Contains("sub"));
    REQUIRE_THROWS_WITH(mul(a, b), Contains("mul"));
    REQUIRE_THROWS_WITH(div(a, b), Contains("div"));
    REQUIRE_THROWS_WITH(a * ones({3, 3}), Contains("mul") && Contains("(3, 3)"));
}

TEST_CASE("matmul inner-size and batch mismatches throw ValueError", "[ops][errors][matmul]") {
    REQUIRE_THROWS_AS(matmul(ones({2, 3}), ones({4, 5})), ValueError);
    REQUIRE_THROWS_WITH(matmul(ones({2, 3}), ones({4, 5})),
                        Contains("matmul") && Contains("(2, 3)") && Contains("(4, 5)"));
    REQUIRE_THROWS_WITH(matmul(ones({2, 2, 3}), ones({3, 3, 4})), Contains("matmul") && Contains("batch"));
    REQUIRE_THROWS_WITH(matmul(ones({3}), ones({3, 4})), Contains("matmul"));
}

TEST_CASE("a bad dim throws ValueError with the valid range", "[ops][errors]") {
    Tensor x = ones({2, 3});
    REQUIRE_THROWS_AS(x.sum(5), ValueError);
    REQUIRE_THROWS_WITH(x.sum(5), Contains("sum") && Contains("dim 5") && Contains("[-2, 2)"));
    REQUIRE_THROWS_WITH(x.sum(-3), Contains("sum") && Contains("dim -3"));
    REQUIRE_THROWS_WITH(x.mean(2), Contains("mean"));
    REQUIRE_THROWS_WITH(x.max(2), Contains("max"));
    REQUIRE_THROWS_WITH(x.softmax(2), Contains("dim 2"));
    REQUIRE_THROWS_WITH(x.transpose(0, 2), Contains("transpose"));
    REQUIRE_THROWS_WITH(concat({x, x}, 2), Contains("concat"));
    REQUIRE_THROWS_WITH(argmax(x, 3), Contains("argmax"));
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
