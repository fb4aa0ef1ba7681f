// core/matmul.cpp — batched matrix multiply on BLAS gemm (core/blas.hpp).
// Legend: A (..., n, k), B (..., k, m), Y (..., n, m); G = dL/dY; (...) the batch dims.
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/matmul.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad {

// ---- matmul --------------------------------------------------------------------------------------
// forward : Y[b] = A[b] @ B[b]           A (..., n, k), B (..., k, m), Y (..., n, m)
//           the batch dims (...) broadcast; a 2-D operand is shared by every batch
// backward: dA[b] = G[b] @ B[b]ᵀ         summed over the batches where A was broadcast
//           dB[b] = A[b]ᵀ @ G[b]         summed over the batches where B was broadcast
// Every product is one BLAS gemm on contiguous buffers, transposes passed as flags (no copy).
// Common case, B 2-D: A's batches fold into rows, so forward and each backward are one gemm:
//           Y (Bn, m) = A (Bn, k) @ B,   dA = G @ Bᵀ,   dB (k, m) = Aᵀ (k, Bn) @ G (Bn, m)
namespace {
struct MatmulPlan {
    std::size_t n, k, m;
    ArrayShape batch;                                     // broadcast batch shape of Y
    std::vector<std::size_t> a_off, b_off;           // per batch: matrix offset into A and B
};

MatmulPlan plan_matmul(const ArrayShape& sa, const ArrayShape& sb) {
    check(sa.size() >= 2 && sb.size() >= 2, "matmul",
          "needs operands of at least 2 dims; got {} and {}", lazy_shape(sa), lazy_shape(sb));
    MatmulPlan p;
    p.n = sa[sa.size() - 2];
    p.k = sa.back();
    p.m = sb.back();
    check(sb[sb.size() - 2] == p.k, "matmul", "inner sizes differ: {} @ {} ({} vs {})", lazy_shape(sa),
          lazy_shape(sb), p.k, sb[sb.size() - 2]);
    const ArrayShape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    const std::size_t r = std::max(ba.size(), bb.size());
    auto dim_of = [r](const ArrayShape& s, std::size_t i) { return i < r - s.size() ? 1 : s[i - (r - s.size())]; };
    p.batch.resize(r);
    for (std::size_t i = 0; i < r; ++i) {
        const std::size_t x = dim_of(ba, i), y = dim_of(bb, i);
        check(x == y || x == 1 || y == 1, "matmul", "batch dims of {} and {} cannot be broadcast",
              lazy_shape(sa), lazy_shape(sb));
        p.batch[i] = x == 1 ? y : x;  // (not max: a 0-size batch broadcast with 1 is 0, as in PyTorch)
    }
    const std::size_t nb = std::accumulate(p.batch.begin(), p.batch.end(), std::size_t{1}, std::multiplies<>());
    p.a_off.resize(nb);
    p.b_off.resize(nb);
    for (std::size_t flat = 0; flat < nb; ++flat) {
        // Unravel `flat` over p.batch; a size-1 operand dim contributes stride 0 (broadcast).
        std::size_t rem = flat, oa = 0, ob = 0, sta = 1, stb = 1;
        for (std::size_t i = r; i-- > 0;) {
            const std::size_t idx = rem % p.batch[i];
            rem /= p.batch[i];
            const std::size_t da = dim_of(ba, i), db = dim_of(bb, i);
            if (da > 1) oa += idx * sta;
            if (db > 1) ob += idx * stb;
            sta *= da;
            stb *= db;
        }
        p.a_off[flat] = oa * p.n * p.k;
        p.b_off[flat] = ob * p.k * p.m;
    }
    return p;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("matmul", a, b);
    const ArrayShape sa = array_shape(a.data()), sb = array_shape(b.data());
    MatmulPlan p = plan_matmul(sa, sb);
    ArrayShape ys = p.batch;
    ys.push_back(p.n);
    ys.push_back(p.m);
    checked_numel(ys, "matmul");
    Array y(ys);
    const std::size_t nb = p.a_off.size();
    const bool b_shared = sb.size() == 2;  // fold A's batches into rows: one gemm
    if (b_shared) {
        gemm(false, false, nb * p.n, p.m, p.k, 1, a.data().data(), p.k, b.data().data(), p.m, 0, y.data(), p.m);
    } else {
        for (std::size_t i = 0; i < nb; ++i)
            gemm(false, false, p.n, p.m, p.k, 1, a.data().data() + p.a_off[i], p.k,
                 b.data().data() + p.b_off[i], p.m, 0, y.data() + i * p.n * p.m, p.m);
    }
    // A gemm with beta = 0 writes every element, so dA and dB need no zero-fill.
    return make_result(
        std::move(y), "matmul", {a, b},
        [a, b, p = std::move(p), b_shared, ra = a.requires_grad(),
         rb = b.requires_grad()](const Array& g, const Array&) {
            const Array& A = a.data();
            const Array& B = b.data();
            Grads out(2);
            const std::size_t nb = p.a_off.size(), n = p.n, k = p.k, m = p.m;
            if (ra) {
                Array dA(A.shape());
                if (b_shared) {
                    gemm(false, true, nb * n, k, m, 1, g.data(), m, B.data(), m, 0, dA.data(), k);
                } else {
                    dA.fill(0);
                    for (std::size_t i = 0; i < nb; ++i)  // beta = 1: broadcast batches add up
                        gemm(false, true, n, k, m, 1, g.data() + i * n * m, m, B.data() + p.b_off[i], m,
                             1, dA.data() + p.a_off[i], k);
                }
                out[0] = std::move(dA);
            }
            if (rb) {
                Array dB(B.shape());
                if (b_shared) {
                    gemm(true, false, k, m, nb * n, 1, A.data(), k, g.data(), m, 0, dB.data(), m);
                } else {
                    dB.fill(0);
                    for (std::size_t i = 0; i < nb; ++i)
                        gemm(true, false, k, m, n, 1, A.data() + p.a_off[i], k, g.data() + i * n * m, m,
                             1, dB.data() + p.b_off[i], m);
                }
                out[1] = std::move(dB);
            }
            return out;
        });
}

}  // namespace xgrad
