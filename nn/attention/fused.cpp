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
//
// Where the matrices live. The kernels below read each operand through a HeadView: matrix n is
// at a base address plus an offset, its rows ld apart, which gemm takes as its lda. Two layouts:
//   fused_causal_attention           q (N, Tq, hd) contiguous: matrix n at n·Tq·hd, ld = hd
//   fused_causal_attention_packed    qkv (B, T, 3d) as c_attn writes it, d = H·hd, n = b·H + h:
//                                    q of (b, h) at b·T·3d + h·hd, k d further, v 2d further,
//                                    ld = 3d; out (B, T, d): b·T·d + h·hd, ld = d
// The second is the first on the heads that split_heads would copy out (narrow, reshape,
// transpose(1, 2)) and merge_heads copy back: the same sums, with no copy in either pass.
// ref: Vaswani et al. 2017, eq. (1); llm.c attention_backward (train_gpt2.c).
#include <xgrad/nn/attention/fused.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>

namespace xgrad::nn::functional {

namespace {
// Causality as gemm_visible reads it: query i sees key j, and key j is seen by query i, iff j ≤ i.
bool sees(std::size_t i, std::size_t j) { return j <= i; }
bool seen_by(std::size_t j, std::size_t i) { return j <= i; }

// The N matrices of one operand: matrix n = (b, h), b = n / heads, h = n % heads, starts at
// data + b·batch_stride + h·head_stride; its rows are ld elements apart. An empty array (T = 0)
// has no data pointer, and its matrices no rows: they stay null rather than offsets from null.
template <class T>
struct HeadView {
    T* data;
    std::size_t heads, batch_stride, head_stride, ld;
    T* operator()(std::size_t n) const {
        return data == nullptr ? data : data + (n / heads) * batch_stride + (n % heads) * head_stride;
    }
};
using In = HeadView<const real>;
using Out = HeadView<real>;

// N contiguous (rows, cols) matrices.
template <class T>
HeadView<T> contiguous(T* data, std::size_t rows, std::size_t cols) { return {data, 1, rows * cols, 0, cols}; }

// The H heads of hd columns each in a (B, T, width) array, the first from column `first`: head
// (b, h) of T rows starts at b·T·width + first + h·hd.
template <class T>
HeadView<T> heads_of(T* data, std::size_t H, std::size_t T_, std::size_t width, std::size_t hd, std::size_t first) {
    return {data == nullptr ? data : data + first, H, T_ * width, hd, width};
}

// q, k and v of every head in c_attn's (B, T, 3d) layout, d = H·hd: from columns 0, d and 2d.
template <class T>
std::array<HeadView<T>, 3> qkv_heads(T* data, std::size_t H, std::size_t T_, std::size_t d) {
    const std::size_t hd = d / H;
    return {heads_of(data, H, T_, 3 * d, hd, 0), heads_of(data, H, T_, 3 * d, hd, d),
            heads_of(data, H, T_, 3 * d, hd, 2 * d)};
}

struct Sizes {
    std::size_t N, Tq, Tk, hd, hv;
    real scale;
};

// out and P (N, Tq, Tk) from q, k, v: the forward above. The N matrices are shared out over the
// threads (each thread's gemm runs on it alone).
void attend(const Sizes& s, In q, In k, In v, Out out, real* P) {
    const std::size_t Tq = s.Tq, Tk = s.Tk;
    parallel_for(s.N, 1, [&](std::size_t n0, std::size_t n1) {
        for (std::size_t n = n0; n < n1; ++n) {
            real* Pn = P + n * Tq * Tk;
            // S (Tq, Tk) = scale · q · kᵀ
            gemm(false, true, Tq, Tk, s.hd, s.scale, q(n), q.ld, k(n), k.ld, 0, Pn, Tk);
            for (std::size_t i = 0; i < Tq; ++i) {
                // causal: query i sees keys 0..i; the others get weight exactly 0 (e^-inf)
                const std::size_t seen = std::min(i + 1, Tk);
                real* row = Pn + i * Tk;
                softmax_row(row, row, seen);
                std::fill(row + seen, row + Tk, real(0));
            }
            // out (Tq, hv) = P · v, row i summing over its keys j ≤ i only (a future NaN stays out)
            gemm_visible(false, false, Tq, s.hv, Tk, 1, Pn, Tk, v(n), v.ld, out(n), out.ld, sees);
        }
    });
}

// dq, dk, dv from g = dL/dout and the saved P: the backward above. Every element of dq, dk and
// dv is written (gemm with beta = 0), so they may start uninitialised.
void attend_backward(const Sizes& s, const real* P, In g, In q, In k, In v, Out dq, Out dk, Out dv) {
    const std::size_t Tq = s.Tq, Tk = s.Tk;
    parallel_for(s.N, 1, [&](std::size_t n0, std::size_t n1) {
        std::vector<real> dS(Tq * Tk);  // dL/dP, then dL/dS, of one matrix
        for (std::size_t n = n0; n < n1; ++n) {
            const real* Pn = P + n * Tq * Tk;
            // in the forward pass this was: out = P · v; so dP = g · vᵀ and dv = Pᵀ · g
            gemm(false, true, Tq, Tk, s.hv, 1, g(n), g.ld, v(n), v.ld, 0, dS.data(), Tk);
            gemm_visible(true, false, Tk, s.hv, Tq, 1, Pn, Tk, g(n), g.ld, dv(n), dv.ld, seen_by);
            // in the forward pass this was: P = softmax(S) per row; so dS = P ⊙ (dP − Σ dP⊙P)
            for (std::size_t i = 0; i < Tq; ++i) {
                const std::size_t seen = std::min(i + 1, Tk);
                real* row = dS.data() + i * Tk;
                softmax_backward_row(Pn + i * Tk, row, row, seen);
                std::fill(row + seen, row + Tk, real(0));
            }
            // in the forward pass this was: S = scale · q · kᵀ; so dq = scale · dS · k, dk = scale · dSᵀ · q
            gemm_visible(false, false, Tq, s.hd, Tk, s.scale, dS.data(), Tk, k(n), k.ld, dq(n), dq.ld, sees);
            gemm_visible(true, false, Tk, s.hd, Tq, s.scale, dS.data(), Tk, q(n), q.ld, dk(n), dk.ld, seen_by);
        }
    });
}
}  // namespace

Tensor fused_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale_opt) {
    const profiler::OpScope scope("fused_causal_attention", q, k, v);
    const detail::AttentionSizes a = detail::check_qkv(q, k, &v, "fused_causal_attention");
    Sizes s{1, a.Tq, a.Tk, a.hd, a.hv, detail::attention_scale(scale_opt, a.hd, "fused_causal_attention")};
    for (std::size_t n : a.lead) s.N *= n;  // B·H matrices
    const bool backward = grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
    detail::check_weights_fit(s.N, s.Tq, s.Tk, backward, "fused_causal_attention");
    ArrayShape ys = array_shape(q.data());
    ys.back() = s.hv;
    Array out(ys);
    Array P(ArrayShape{s.N, s.Tq, s.Tk});  // the weights, saved for the backward
    attend(s, contiguous(q.data().data(), s.Tq, s.hd), contiguous(k.data().data(), s.Tk, s.hd),
           contiguous(v.data().data(), s.Tk, s.hv), contiguous(out.data(), s.Tq, s.hv), P.data());
    return make_result(std::move(out), "fused_causal_attention", {q, k, v},
                       [q, k, v, P = std::move(P), s](const Array& g, const Array&) {
                           Array dq(q.data().shape()), dk(k.data().shape()), dv(v.data().shape());
                           attend_backward(s, P.data(), contiguous(g.data(), s.Tq, s.hv),
                                           contiguous(q.data().data(), s.Tq, s.hd),
                                           contiguous(k.data().data(), s.Tk, s.hd),
                                           contiguous(v.data().data(), s.Tk, s.hv), contiguous(dq.data(), s.Tq, s.hd),
                                           contiguous(dk.data(), s.Tk, s.hd), contiguous(dv.data(), s.Tk, s.hv));
                           return make_grads(std::move(dq), std::move(dk), std::move(dv));
                       });
}

Tensor fused_causal_attention_packed(const Tensor& qkv, std::int64_t n_head, std::optional<double> scale_opt) {
    const char* op = "fused_causal_attention_packed";
    const profiler::OpScope scope(op, qkv);
    check(qkv.defined(), op, "qkv is an undefined tensor");
    const ArrayShape xs = array_shape(qkv.data());
    check(xs.size() == 3, op, "qkv must be (B, T, 3·d); got shape {}", lazy_shape(xs));
    check(n_head >= 1, op, "n_head must be positive; got {}", n_head);
    const std::size_t B = xs[0], T = xs[1], H = std::size_t(n_head);
    // H ≤ the last dim / 3 first, so that 3 · H below cannot wrap past 2^64 to a divisor of it
    check(xs[2] > 0 && H <= xs[2] / 3, op,
          "the last dim of qkv ({}) must be 3 · n_head · hd with hd ≥ 1: a positive multiple of 3 · n_head, "
          "at least 3 · {}",
          xs[2], n_head);
    check(xs[2] % (3 * H) == 0, op,
          "the last dim of qkv ({}) must be 3 · n_head · hd: a positive multiple of 3 · n_head = {}", xs[2], 3 * H);
    const std::size_t d = xs[2] / 3, hd = d / H;
    const Sizes s{B * H, T, T, hd, hd, detail::attention_scale(scale_opt, hd, op)};
    detail::check_weights_fit(s.N, T, T, grad_enabled() && qkv.requires_grad(), op);
    Array out(ArrayShape{B, T, d});
    Array P(ArrayShape{s.N, T, T});  // the weights, saved for the backward
    // q, k, v: the heads of qkv (B, T, 3d); out: the heads of (B, T, d)
    const auto [q, k, v] = qkv_heads(qkv.data().data(), H, T, d);
    attend(s, q, k, v, heads_of(out.data(), H, T, d, hd, 0), P.data());
    return make_result(std::move(out), op, {qkv}, [qkv, P = std::move(P), s, H, d](const Array& g, const Array&) {
        // dqkv (B, T, 3d): dq, dk and dv written straight into their columns, nothing summed
        Array dqkv(qkv.data().shape());
        const auto [q, k, v] = qkv_heads(qkv.data().data(), H, s.Tq, d);
        const auto [dq, dk, dv] = qkv_heads(dqkv.data(), H, s.Tq, d);
        attend_backward(s, P.data(), heads_of(g.data(), H, s.Tq, d, s.hd, 0), q, k, v, dq, dk, dv);
        return make_grads(std::move(dqkv));
    });
}

}  // namespace xgrad::nn::functional
