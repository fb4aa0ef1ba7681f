// nn/attention/fused.cpp — causal attention as one fused op, forward and backward.
//
// Oracle and tests: nn/attention/fused.hpp. Per matrix n: two gemm calls and one row softmax,
// where the composed form materialises kᵀ, scores, masked scores and weights (N, Tq, Tk).
// Legend: N = Π of the leading dims (B·H), Tq queries, Tk keys, hd head width, hv value width.
// q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv), out (..., Tq, hv); P (N, Tq, Tk) the weights.
// forward, for each n of the N matrices (gemm: core/blas.hpp):
//   S (Tq, Tk)   = scale · q (Tq, hd) · kᵀ (hd, Tk)
//   P            = softmax over each row of S; row i keeps keys j ≤ i, the rest are 0
//   out (Tq, hv) = P (Tq, Tk) · v (Tk, hv)                     saved: P
// backward, with g = dL/dout (N, Tq, hv):
//   dP (Tq, Tk) = g · vᵀ                dv (Tk, hv) = Pᵀ · g
//   dS = P ⊙ (dP − Σ_j dP⊙P)            (softmax's backward, row by row over j ≤ i; 0 above)
//   dq (Tq, hd) = scale · dS · k        dk (Tk, hd) = scale · dSᵀ · q
// The four products that sum over Tq or Tk are gemm_visible (core/masked_matmul.hpp): gemm, with
// any row that met a non-finite value across the diagonal summed again over j ≤ i.
// ref: Vaswani et al. 2017, eq. (1); llm.c attention_backward (train_gpt2.c).
#include <xgrad/nn/attention/fused.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>

namespace xgrad::nn::functional {

namespace {
// Causality as gemm_visible reads it: query i sees key j, and key j is seen by query i, iff j ≤ i.
bool sees(std::size_t i, std::size_t j) { return j <= i; }
bool seen_by(std::size_t j, std::size_t i) { return j <= i; }
}  // namespace

Tensor fused_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale_opt) {
    const detail::AttentionSizes s = detail::check_qkv(q, k, &v, "fused_causal_attention");
    const std::size_t Tq = s.Tq, Tk = s.Tk, hd = s.hd, hv = s.hv;
    const real scale = detail::attention_scale(scale_opt, hd, "fused_causal_attention");
    std::size_t N = 1;  // B·H matrices
    for (std::size_t n : s.lead) N *= n;
    ArrayShape ys = array_shape(q.data());
    ys.back() = hv;
    Array out(ys);
    Array P(ArrayShape{N, Tq, Tk});  // the weights, saved for the backward
    const real* pq = q.data().data();
    const real* pk = k.data().data();
    const real* pv = v.data().data();
    // The N matrices are shared out over the threads (each thread's gemm runs on it alone).
    parallel_for(N, 1, [&](std::size_t n0, std::size_t n1) {
        for (std::size_t n = n0; n < n1; ++n) {
            real* Pn = P.data() + n * Tq * Tk;
            // S (Tq, Tk) = scale · q · kᵀ
            gemm(false, true, Tq, Tk, hd, scale, pq + n * Tq * hd, hd, pk + n * Tk * hd, hd, 0, Pn, Tk);
            for (std::size_t i = 0; i < Tq; ++i) {
                // causal: query i sees keys 0..i; the others get weight exactly 0 (e^-inf)
                const std::size_t seen = std::min(i + 1, Tk);
                real* row = Pn + i * Tk;
                softmax_row(row, row, seen);
                std::fill(row + seen, row + Tk, real(0));
            }
            // out (Tq, hv) = P · v, row i summing over its keys j ≤ i only (a future NaN stays out)
            gemm_visible(false, false, Tq, hv, Tk, 1, Pn, Tk, pv + n * Tk * hv, hv, out.data() + n * Tq * hv, hv,
                         sees);
        }
    });
    return make_result(
        std::move(out), "fused_causal_attention", {q, k, v},
        [q, k, v, P = std::move(P), N, Tq, Tk, hd, hv, scale](const Array& g, const Array&) {
            const real* pq = q.data().data();
            const real* pk = k.data().data();
            const real* pv = v.data().data();
            Array dq(q.data().shape()), dk(k.data().shape()), dv(v.data().shape());
            parallel_for(N, 1, [&](std::size_t n0, std::size_t n1) {
                std::vector<real> dS(Tq * Tk);  // dL/dP, then dL/dS, of one matrix
                for (std::size_t n = n0; n < n1; ++n) {
                    const real* Pn = P.data() + n * Tq * Tk;
                    const real* gn = g.data() + n * Tq * hv;
                    // in the forward pass this was: out = P · v; so dP = g · vᵀ and dv = Pᵀ · g
                    gemm(false, true, Tq, Tk, hv, 1, gn, hv, pv + n * Tk * hv, hv, 0, dS.data(), Tk);
                    gemm_visible(true, false, Tk, hv, Tq, 1, Pn, Tk, gn, hv, dv.data() + n * Tk * hv, hv, seen_by);
                    // in the forward pass this was: P = softmax(S) per row; so dS = P ⊙ (dP − Σ dP⊙P)
                    for (std::size_t i = 0; i < Tq; ++i) {
                        const std::size_t seen = std::min(i + 1, Tk);
                        real* row = dS.data() + i * Tk;
                        softmax_backward_row(Pn + i * Tk, row, row, seen);
                        std::fill(row + seen, row + Tk, real(0));
                    }
                    // in the forward pass this was: S = scale · q · kᵀ; so dq = scale · dS · k, dk = scale · dSᵀ · q
                    gemm_visible(false, false, Tq, hd, Tk, scale, dS.data(), Tk, pk + n * Tk * hd, hd,
                                 dq.data() + n * Tq * hd, hd, sees);
                    gemm_visible(true, false, Tk, hd, Tq, scale, dS.data(), Tk, pq + n * Tq * hd, hd,
                                 dk.data() + n * Tk * hd, hd, seen_by);
                }
            });
            return make_grads(std::move(dq), std::move(dk), std::move(dv));
        });
}

}  // namespace xgrad::nn::functional
