// tests/core/test_matmul.cpp — core/matmul.cpp and the gemm of core/blas.cpp (float32).
//
// Covers: gemm's four transpose cases and beta against the triple loop, on both sides of the rule
// that picks libxsmm or OpenBLAS, with padded leading dimensions; matmul 2-D, batched,
// (B, n, k) @ (k, m), (1, n, k) @ (B, k, m) and (n, k) @ (B, k, m) with their gradients
// dA = G Bᵀ, dB = Aᵀ G summed over broadcast batches; empty inner and batch dims; the errors of
// mismatched sizes. Gemm over several threads is in test_threads.cpp; gradchecks in
// gradcheck_matmul.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <xtensor/xmanipulation.hpp>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/detail/permute.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// ==== matmul ==============================================================================================

// core/blas.cpp routes some shapes differently (A·Bᵀ with K < 32 copies Bᵀ first, one row is a
// gemv): every route must give the plain triple loop's C = alpha·op(A)·op(B) + beta·C, and with
// beta = 0 ignore what C held (NaN here).
TEST_CASE("gemm: all four transpose cases and beta 0 or 1 equal the triple loop", "[ops][matmul][gemm]") {
    struct Case { std::size_t M, N, K; };
    for (const Case c : {Case{32, 200, 30}, Case{3, 5, 2}, Case{4, 7, 40}, Case{1, 1, 1}, Case{200, 64, 31},
                          Case{1, 200, 30}, Case{1, 7, 40}}) {
        for (int ta = 0; ta < 2; ++ta) {
            for (int tb = 0; tb < 2; ++tb) {
                for (real beta : {real(0), real(1)}) {
                    // op(A) (M, K), op(B) (K, N); stored as (K, M) or (N, K) when transposed
                    std::vector<real> A(c.M * c.K), B(c.K * c.N), C(c.M * c.N);
                    for (std::size_t i = 0; i < A.size(); ++i) A[i] = real(std::sin(0.7 * double(i) + 0.1));
                    for (std::size_t i = 0; i < B.size(); ++i) B[i] = real(std::cos(0.3 * double(i)));
                    for (std::size_t i = 0; i < C.size(); ++i) C[i] = beta == 0 ? kNaN : real(0.5) - real(i % 3);
                    const auto a = [&](std::size_t m, std::size_t k) { return ta ? A[k * c.M + m] : A[m * c.K + k]; };
                    const auto b = [&](std::size_t k, std::size_t n) { return tb ? B[n * c.K + k] : B[k * c.N + n]; };
                    std::vector<double> want(c.M * c.N);
                    for (std::size_t m = 0; m < c.M; ++m)
                        for (std::size_t n = 0; n < c.N; ++n) {
                            double acc = 0;
                            for (std::size_t k = 0; k < c.K; ++k) acc += double(a(m, k)) * double(b(k, n));
                            want[m * c.N + n] = 2 * acc + (beta == 0 ? 0.0 : double(C[m * c.N + n]));
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

// The library rule of core/blas.cpp (libxsmm for small float products with beta 0 or 1, alpha
// applied to its copy of Bᵀ or to C; OpenBLAS above M·N·K = 10⁸, for Aᵀ·B with N ≥ 512 and for
// beta = 1 with alpha ≠ 1 on a plain B, or beta neither 0 nor 1; OpenBLAS alone when
// xgrad is built without libxsmm): every side of it, with padded rows (lda, ldb, ldc each past the
// stored row length), must give the double-precision triple loop's C = alpha·op(A)·op(B) + beta·C
// within 1e-4 of max |C|, leave the padding alone, and with beta = 0 ignore what C held (NaN).
TEST_CASE("gemm: both sides of the library rule, padded rows, equal the triple loop in double",
          "[ops][matmul][gemm]") {
    struct Case { std::size_t M, N, K; };
    struct Scalars { real alpha, beta; };
    const Case cases[] = {{64, 64, 32}, {768, 128, 128}, {7, 5, 3}, {1, 64, 64}, {128, 512, 768},
                          {256, 4096, 128}};
    for (const Case c : cases) {
        // The loop below costs M·N·K per pair (and runs unoptimised under the sanitizers): past 10⁷
        // the pairs a model's products use, alpha 1 with beta 0 (forward) and 1 (accumulated
        // gradients); past 10⁸, OpenBLAS's side of the rule, beta 1 alone.
        const double macs = double(c.M) * double(c.N) * double(c.K);
        for (int ta = 0; ta < 2; ++ta) {
            for (int tb = 0; tb < 2; ++tb) {
                for (const Scalars sc : {Scalars{1, 0}, Scalars{1, 1}, Scalars{0.3f, 0}, Scalars{0.3f, 1},
                                         Scalars{2, 0.5f}}) {
                    if (macs > 1e7 && sc.alpha != 1) continue;
                    if (macs > 1e8 && sc.beta != 1) continue;
                    INFO("M " << c.M << " N " << c.N << " K " << c.K << " ta " << ta << " tb " << tb << " alpha "
                              << sc.alpha << " beta " << sc.beta);
                    // stored A (M, K) or (K, M), B (K, N) or (N, K), C (M, N), each row padded
                    const std::size_t a_rows = ta ? c.K : c.M, a_cols = ta ? c.M : c.K;
                    const std::size_t b_rows = tb ? c.N : c.K, b_cols = tb ? c.K : c.N;
                    const std::size_t lda = a_cols + 3, ldb = b_cols + 5, ldc = c.N + 2;
                    std::vector<real> A(a_rows * lda), B(b_rows * ldb), C(c.M * ldc);
                    for (std::size_t i = 0; i < A.size(); ++i) A[i] = real(std::sin(0.7 * double(i) + 0.1));
                    for (std::size_t i = 0; i < B.size(); ++i) B[i] = real(std::cos(0.3 * double(i)));
                    for (std::size_t i = 0; i < C.size(); ++i)
                        C[i] = sc.beta == 0 && i % ldc < c.N ? kNaN : real(0.5) - real(i % 3);
                    const std::vector<real> C0 = C;
                    // want = alpha·op(A)·op(B) + beta·C, summed in double, row by row of op(B)
                    std::vector<double> want(c.M * c.N, 0.0);
                    for (std::size_t m = 0; m < c.M; ++m) {
                        double* row = want.data() + m * c.N;
                        for (std::size_t k = 0; k < c.K; ++k) {
                            const double a = ta ? A[k * lda + m] : A[m * lda + k];
                            for (std::size_t n = 0; n < c.N; ++n)
                                row[n] += a * double(tb ? B[n * ldb + k] : B[k * ldb + n]);
                        }
                        for (std::size_t n = 0; n < c.N; ++n)
                            row[n] = double(sc.alpha) * row[n] +
                                     (sc.beta == 0 ? 0.0 : double(sc.beta) * double(C[m * ldc + n]));
                    }
                    double scale = 0;
                    for (const double v : want) scale = std::max(scale, std::abs(v));
                    gemm(ta, tb, c.M, c.N, c.K, sc.alpha, A.data(), lda, B.data(), ldb, sc.beta, C.data(), ldc);
                    double err = 0;
                    bool padding_kept = true;
                    for (std::size_t m = 0; m < c.M; ++m) {
                        for (std::size_t n = 0; n < c.N; ++n)
                            err = std::max(err, std::abs(double(C[m * ldc + n]) - want[m * c.N + n]));
                        for (std::size_t n = c.N; n < ldc; ++n)
                            padding_kept = padding_kept && C[m * ldc + n] == C0[m * ldc + n];
                    }
                    CHECK(err <= 1e-4 * scale);  // NaN fails too
                    CHECK(padding_kept);
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

TEST_CASE("matmul inner-size and batch mismatches throw ValueError", "[ops][errors][matmul]") {
    REQUIRE_THROWS_AS(matmul(ones({2, 3}), ones({4, 5})), ValueError);
    REQUIRE_THROWS_WITH(matmul(ones({2, 3}), ones({4, 5})),
                        Contains("matmul") && Contains("(2, 3)") && Contains("(4, 5)"));
    REQUIRE_THROWS_WITH(matmul(ones({2, 2, 3}), ones({3, 3, 4})), Contains("matmul") && Contains("batch"));
    REQUIRE_THROWS_WITH(matmul(ones({3}), ones({3, 4})), Contains("matmul"));
}

// ---- bug 3 ---------------------------------------------------------------------------------------
// The batch dims broadcast as in PyTorch: (0) with (1) gives (0), not max(0, 1) = 1.
// ref: torch 1.13, torch.matmul(torch.zeros(0, 2, 3), torch.randn(3, 4)).shape == (0, 2, 4)
TEST_CASE("bug 3: matmul with a 0-size batch returns the empty broadcast shape", "[reliability][bug3][regression]") {
    SECTION("A (0, 2, 3) @ B (3, 4)") {
        Tensor a = zeros({0, 2, 3}, true), b = randn({3, 4}, true);
        Tensor y = matmul(a, b);
        REQUIRE(y.shape() == Shape{0, 2, 4});
        y.sum().backward();
        REQUIRE(a.grad().shape() == Shape{0, 2, 3});
        require_values(b.grad(), zeros({3, 4}));  // nothing flowed: dB = Aᵀ·G over no rows
    }
    SECTION("A (1, 2, 3) @ B (0, 3, 4)") {
        Tensor a = randn({1, 2, 3}, true), b = zeros({0, 3, 4}, true);
        Tensor y = matmul(a, b);
        REQUIRE(y.shape() == Shape{0, 2, 4});
        y.sum().backward();
        require_values(a.grad(), zeros({1, 2, 3}));
        REQUIRE(b.grad().shape() == Shape{0, 3, 4});
    }
    SECTION("an empty inner size gives zeros") {  // (2, 0) @ (0, 3) = zeros (2, 3), as in PyTorch
        require_values(matmul(zeros({2, 0}), zeros({0, 3})), zeros({2, 3}));
    }
}
