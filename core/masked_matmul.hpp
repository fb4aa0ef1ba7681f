// core/masked_matmul.hpp — matrix products that never read a hidden pair (core/masked_matmul.cpp).
//
// Attention multiplies weights (Tq, Tk) by values (Tk, hv) with the weights of hidden keys set to
// 0. A plain matmul still reads those values: 0 · NaN = NaN, 0 · inf = NaN, so one non-finite
// future value spoils every earlier row. These products sum only over the pairs a mask keeps:
//   masked_matmul (a, b, keep): y[m, n] = Σ_{k : keep[m, k] ≠ 0} a[m, k] · b[k, n]
//   sampled_matmul(a, b, keep): y[m, n] = keep[m, n] ≠ 0 ? Σ_k a[m, k] · b[k, n] : 0
// Each is the other's backward. Their gradients are the same restricted sums, so a hidden pair
// reaches neither the output nor any gradient.
// Legend: a (..., M, K), b (..., K, N), y (..., M, N); "..." the same leading dims for a and b.
// ref: sampled dense-dense matrix product (SDDMM), as torch.sparse.sampled_addmm.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad {

// keep broadcasts to (..., M, K), holds 0 (hidden) or any nonzero (kept); no gradient. A row with
// no kept k gives 0. Throws ValueError for ranks below 2, leading dims or inner sizes that differ,
// or a keep that does not broadcast.
Tensor masked_matmul(const Tensor& a, const Tensor& b, const Tensor& keep);

// keep broadcasts to (..., M, N); y is 0 where keep is 0, whatever a and b hold there. Errors as
// masked_matmul.
Tensor sampled_matmul(const Tensor& a, const Tensor& b, const Tensor& keep);

// The kernel under both, for one matrix: C (M, N) = alpha · Σ_{k : visible(m, k)} A[m, k] · B[k, n],
// with A = op(A) (M, K) and B = op(B) (K, N) as gemm's. The caller guarantees A[m, k] = 0 wherever
// visible(m, k) is false. gemm then computes every sum exactly, except in a row m that meets a
// non-finite B row k it may not see (0 · NaN): only those rows are summed again over their
// visible k. With finite inputs this is one gemm.
template <class Visible>
void gemm_visible(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, real alpha,
                  const real* A, std::size_t lda, const real* B, std::size_t ldb, real* C, std::size_t ldc,
                  Visible visible) {
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0, C, ldc);
    // B is stored (K, N), or (N, K) when trans_b. An inf or a NaN has every exponent bit set; the
    // test is on the bits so that the scan vectorises (an integer OR is associative).
    using Bits = std::conditional_t<sizeof(real) == 4, std::uint32_t, std::uint64_t>;
    constexpr Bits exponent = sizeof(real) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
    const std::size_t rows = trans_b ? N : K, cols = trans_b ? K : N;
    Bits any = 0;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
            Bits bits;
            std::memcpy(&bits, B + r * ldb + c, sizeof bits);
            any |= Bits((bits & exponent) == exponent);
        }
    if (!any) return;  // the common case: gemm's sums were exact
    auto non_finite = [](real x) { return !std::isfinite(x); };
    auto a_at = [&](std::size_t m, std::size_t k) { return trans_a ? A[k * lda + m] : A[m * lda + k]; };
    auto b_at = [&](std::size_t k, std::size_t n) { return trans_b ? B[n * ldb + k] : B[k * ldb + n]; };
    std::vector<std::size_t> bad;  // the rows k of op(B) holding an inf or a NaN
    for (std::size_t k = 0; k < K; ++k)
        for (std::size_t n = 0; n < N; ++n)
            if (non_finite(b_at(k, n))) {
                bad.push_back(k);
                break;
            }
    for (std::size_t m = 0; m < M && !bad.empty(); ++m) {
        bool spoiled = false;
        for (std::size_t k : bad) spoiled = spoiled || !visible(m, k);
        if (!spoiled) continue;
        for (std::size_t n = 0; n < N; ++n) {
            real acc = 0;
            for (std::size_t k = 0; k < K; ++k)
                if (visible(m, k)) acc += a_at(m, k) * b_at(k, n);
            C[m * ldc + n] = alpha * acc;
        }
    }
}

}  // namespace xgrad
