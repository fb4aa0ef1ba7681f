// nn/attention/tiled.cpp — causal attention in tiles, forward and backward (FlashAttention-2).
//
// Legend: N = Π of the leading dims (B·H) matrices; per matrix q (Tq, hd), k (Tk, hd), v (Tk, hv),
// out (Tq, hv). A tile is a block of Br queries [i0, i1) against a block of Bc keys [j0, j1).
// Query i sees key j iff j < hi(i) = clamp(i + diagonal + 1, 0, Tk).
//
// Forward, per query row i (Dao 2023, Algorithm 1). The key blocks arrive one at a time; the row
// keeps a running max m, a running sum ℓ and an unnormalised output o (the online softmax):
//   S_ij = scale · q_i · k_j                  for the keys j of the block         (gemm, Br × Bc)
//   m'   = max(m, max_j S_ij)
//   ℓ    = e^(m − m') · ℓ + Σ_j e^(S_ij − m')
//   o    = e^(m − m') · o + Σ_j e^(S_ij − m') · v_j                             (gemm, Br × hv)
//   m    = m'
// At the end every term carries the same e^(−m): out_i = o / ℓ = softmax(S_i) · v exactly, and
// L_i = m + log ℓ = log Σ_j e^(S_ij). Why L suffices: P_ij = e^(S_ij − L_i), so backward recomputes
// S from q and k, a tile at a time, and each weight with one exp. Saved for backward: L, Tq
// numbers per matrix (fused_causal_attention keeps P, Tq·Tk; q, k, v, out are held anyway).
//
// Backward (Algorithm 2), g = dL/dout, D_i = Σ_c g_ic · out_ic, which equals Σ_j P_ij · dP_ij:
//   P = e^(S − L)          dv_j += Σ_i P_ij · g_i        (Pᵀ · g)
//   dP = g · vᵀ            dS = P ⊙ (dP − D)             (softmax's backward, row by row)
//   dq_i += scale · Σ_j dS_ij · k_j                      dk_j += scale · Σ_i dS_ij · q_i
//
// Causality by tiles. A tile whose keys no row of its block sees is skipped, never computed. A
// tile all of whose rows see all of its keys is plain gemm. Only the tiles the diagonal crosses
// are masked: hidden P and dS entries are set 0 (not multiplied: 0 · NaN = NaN), and their
// products go through gemm_visible (core/masked_matmul.hpp), so a NaN or inf in a hidden k or v
// reaches no row that may not see it.
// ref: Dao 2023, "FlashAttention-2", Algorithms 1 and 2; Milakov & Gimelshein 2018 (online softmax).
#include <xgrad/nn/attention/tiled.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/detail/simd.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>

namespace xgrad::nn::functional {

namespace {

// Tile sizes. Forward: 64 queries against 256 keys; backward: 256 queries against 64 keys. The
// long side is the depth of the products that sum over it (P · v over keys; Pᵀ · g, dSᵀ · q over
// queries): fewer, deeper gemm calls. Blocks end (forward) or start (backward) on the diagonal,
// so the masked waste there is at most short² / 2 per block; S and dS (64 KiB each) stay in L2.
constexpr std::size_t kQueryBlock = 64, kKeyBlock = 256;
constexpr std::size_t kBackQueryBlock = 256, kBackKeyBlock = 64;

constexpr real kMinusInf = -std::numeric_limits<real>::infinity();

struct Problem {  // the sizes of one call and its causal rule
    std::size_t N = 0, Tq = 0, Tk = 0, hd = 0, hv = 0;
    real scale = 1;
    std::int64_t diagonal = 0;  // kept in [-Tq, Tk]: beyond, no row sees any key, or every row all
    std::size_t hi(std::size_t i) const {  // query i sees keys [0, hi(i))
        const std::int64_t h = std::int64_t(i) + diagonal + 1;
        return h <= 0 ? 0 : std::min(std::size_t(h), Tk);
    }
};

// Queries [i0, i0 + rows) against keys [j0, j0 + cols) of one matrix.
struct Tile {
    std::size_t i0, rows, j0, cols;
    bool whole;  // every row sees every key: no mask
    Tile(const Problem& p, std::size_t i0_, std::size_t rows_, std::size_t j0_, std::size_t cols_)
        : i0(i0_), rows(rows_), j0(j0_), cols(cols_), whole(j0_ + cols_ <= p.hi(i0_)) {}
    std::size_t seen(const Problem& p, std::size_t r) const {  // row r sees the tile's first `seen` keys
        const std::size_t h = whole ? j0 + cols : p.hi(i0 + r);
        return h <= j0 ? 0 : std::min(h - j0, cols);
    }
};

struct Scratch {  // per thread: S and dS (Br, Bc), one product's tile, m and ℓ (Br), D (Tq)
    std::vector<real> S, dS, tmp, m, l, D;
};

// C (rows, cols) = alpha · a[i0:i1] · b[j0:j1]ᵀ − shift[r] on row r (shift may be null): the
// shift is written into C first and gemm adds the product to it (beta = 1), one pass over C.
void tile_product(const Tile& t, const real* a, const real* b, std::size_t width, real alpha, const real* shift,
                  real* C) {
    for (std::size_t r = 0; r < t.rows; ++r) std::fill(C + r * t.cols, C + (r + 1) * t.cols, shift ? -shift[r] : 0);
    gemm(false, true, t.rows, t.cols, width, alpha, a + t.i0 * width, width, b + t.j0 * width, width, 1, C, t.cols);
}

// s[0:n] ← e^(s − c), returning Σ e^(s − c); s[n:cols] ← 0 (hidden keys: weight exactly 0).
real exp_shifted(real* s, std::size_t n, std::size_t cols, real c) {
    simd::Batch acc(real(0));
    real tail = 0;
    simd::for_row(0, n, [&](auto lanes, std::size_t j) {
        if constexpr (std::is_same_v<decltype(lanes), simd::Batch>) {
            const simd::Batch e = xsimd::exp(simd::load(s + j) - simd::Batch(c));
            simd::store(e, s + j);
            acc += e;
        } else {
            s[j] = std::exp(s[j] - c);
            tail += s[j];
        }
    });
    std::fill(s + n, s + cols, real(0));
    return xsimd::hadd(acc) + tail;
}

// max_j s[j] over s[0:n], n ≥ 1, a register at a time.
real row_max(const real* s, std::size_t n) {
    simd::Batch mb(s[0]);
    real tail = s[0];
    simd::for_row(0, n, [&](auto lanes, std::size_t j) {
        if constexpr (std::is_same_v<decltype(lanes), simd::Batch>) mb = xsimd::max(mb, simd::load(s + j));
        else tail = std::max(tail, s[j]);
    });
    alignas(64) real lanes[simd::W];
    mb.store_aligned(lanes);
    return std::max(tail, *std::max_element(lanes, lanes + simd::W));
}

// C (M, Nc) += alpha · op(A) (M, K) · B (K, Nc). On a masked tile only the pairs visible(m, k)
// enter the sums, through gemm_visible into w.tmp (A is 0 at the hidden pairs already).
template <class Visible>
void add_product(const Tile& t, bool trans_a, std::size_t M, std::size_t Nc, std::size_t K, real alpha,
                 const real* A, const real* B, std::size_t ldb, real* C, std::size_t ldc, Scratch& w,
                 Visible visible) {
    const std::size_t lda = trans_a ? M : K;
    if (t.whole) return gemm(trans_a, false, M, Nc, K, alpha, A, lda, B, ldb, 1, C, ldc);
    w.tmp.resize(M * Nc);
    gemm_visible(trans_a, false, M, Nc, K, alpha, A, lda, B, ldb, w.tmp.data(), Nc, visible);
    for (std::size_t r = 0; r < M; ++r)
        for (std::size_t c = 0; c < Nc; ++c) C[r * ldc + c] += w.tmp[r * Nc + c];
}

// ---- forward: Algorithm 1 for the queries [i0, i1) of one matrix ----------------------------------
// out[i0:i1] (rows, hv) and L[i0:i1]; q, k, v, out, lse point at the matrix. A row that sees no
// key keeps ℓ = 0: out 0, L = -inf.
void forward_rows(const Problem& p, const real* q, const real* k, const real* v, std::size_t i0, std::size_t i1,
                  real* out, real* lse, Scratch& w) {
    const std::size_t rows = i1 - i0, hv = p.hv;
    real* o = out + i0 * hv;  // the unnormalised output o (rows, hv)
    std::fill(o, o + rows * hv, real(0));
    w.m.assign(rows, kMinusInf);
    w.l.assign(rows, real(0));
    w.S.resize(rows * std::min(kKeyBlock, p.Tk));
    const std::size_t kend = p.hi(i1 - 1);  // no row of the block sees a key past this: skipped
    for (std::size_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
        const Tile t(p, i0, rows, j0, std::min(kKeyBlock, kend - j0));
        tile_product(t, q, k, p.hd, p.scale, nullptr, w.S.data());  // S = scale · q · kᵀ
        for (std::size_t r = 0; r < rows; ++r) {
            real* s = w.S.data() + r * t.cols;
            const std::size_t seen = t.seen(p, r);
            if (seen == 0) {
                std::fill(s, s + t.cols, real(0));
                continue;
            }
            // m' = max(m, max_j S_ij); ℓ = e^(m − m') · ℓ + Σ_j e^(S_ij − m'); o = e^(m − m') · o + ...
            const real m_new = std::max(w.m[r], row_max(s, seen));
            const real rescale = std::exp(w.m[r] - m_new);  // 0 on the row's first block (m = -inf)
            w.l[r] = rescale * w.l[r] + exp_shifted(s, seen, t.cols, m_new);
            if (rescale != 1)
                for (std::size_t c = 0; c < hv; ++c) o[r * hv + c] *= rescale;
            w.m[r] = m_new;
        }
        // o[i0:i1] += P (rows, cols) · v[j0:j1] (cols, hv)
        add_product(t, false, rows, hv, t.cols, 1, w.S.data(), v + j0 * hv, hv, o, hv, w,
                    [&](std::size_t r, std::size_t c) { return c < t.seen(p, r); });
    }
    // out_i = o / ℓ, L_i = m + log ℓ
    for (std::size_t r = 0; r < rows; ++r) {
        const bool none = w.l[r] == 0;  // no visible key (ℓ ≥ 1 otherwise, or NaN from a NaN it sees)
        const real inv = none ? real(0) : real(1) / w.l[r];
        for (std::size_t c = 0; c < hv; ++c) o[r * hv + c] *= inv;
        lse[i0 + r] = none ? kMinusInf : w.m[r] + std::log(w.l[r]);
    }
}

// ---- backward: Algorithm 2 for one matrix ---------------------------------------------------------
// dq, dk, dv of the matrix from g = dL/dout, out and L; all pointers at the matrix. Key blocks
// outside, query blocks inside, in a fixed order: the sums do not depend on the thread count.
void backward_matrix(const Problem& p, const real* q, const real* k, const real* v, const real* out, const real* g,
                     const real* lse, real* dq, real* dk, real* dv, Scratch& w) {
    const std::size_t Tq = p.Tq, hd = p.hd, hv = p.hv;
    std::fill(dq, dq + Tq * hd, real(0));
    std::fill(dk, dk + p.Tk * hd, real(0));
    std::fill(dv, dv + p.Tk * hv, real(0));
    w.D.resize(Tq);  // D_i = Σ_c g_ic · out_ic
    for (std::size_t i = 0; i < Tq; ++i) {
        real d = 0;
        for (std::size_t c = 0; c < hv; ++c) d += g[i * hv + c] * out[i * hv + c];
        w.D[i] = d;
    }
    w.S.resize(std::min(kBackQueryBlock, Tq) * std::min(kBackKeyBlock, p.Tk));
    w.dS.resize(w.S.size());
    const std::size_t kend = Tq == 0 ? 0 : p.hi(Tq - 1);  // keys past this are seen by no query: gradient 0
    for (std::size_t j0 = 0; j0 < kend; j0 += kBackKeyBlock) {
        const std::size_t cols = std::min(kBackKeyBlock, kend - j0);
        // The first query that sees key j0 has i + diagonal ≥ j0; the blocks above it are skipped.
        const auto first = std::size_t(std::max<std::int64_t>(0, std::int64_t(j0) - p.diagonal));
        for (std::size_t i0 = first; i0 < Tq; i0 += kBackQueryBlock) {
            const Tile t(p, i0, std::min(kBackQueryBlock, Tq - i0), j0, cols);
            real *P = w.S.data(), *dS = w.dS.data();
            auto sees = [&](std::size_t r, std::size_t c) { return c < t.seen(p, r); };
            auto seen_by = [&](std::size_t c, std::size_t r) { return c < t.seen(p, r); };
            // in the forward pass this was: P = softmax(S) per row; so P = e^(S − L), recomputed
            tile_product(t, q, k, hd, p.scale, lse + i0, P);  // S − L
            for (std::size_t r = 0; r < t.rows; ++r) exp_shifted(P + r * cols, t.seen(p, r), cols, 0);
            // in the forward pass this was: out = P · v; so dv += Pᵀ · g and dP = g · vᵀ
            add_product(t, true, cols, hv, t.rows, 1, P, g + i0 * hv, hv, dv + j0 * hv, hv, w, seen_by);
            tile_product(t, g, v, hv, 1, w.D.data() + i0, dS);  // dP − D
            // dS = P ⊙ (dP − D), set (not multiplied) to 0 at hidden keys, where dP may be NaN
            for (std::size_t r = 0; r < t.rows; ++r) {
                const std::size_t seen = t.seen(p, r);
                real* ds = dS + r * cols;
                const real* pr = P + r * cols;
                for (std::size_t c = 0; c < seen; ++c) ds[c] *= pr[c];
                std::fill(ds + seen, ds + cols, real(0));
            }
            // in the forward pass this was: S = scale · q · kᵀ; so dq += scale · dS · k, dk += scale · dSᵀ · q
            add_product(t, false, t.rows, hd, cols, p.scale, dS, k + j0 * hd, hd, dq + i0 * hd, hd, w, sees);
            add_product(t, true, cols, hd, t.rows, p.scale, dS, q + i0 * hd, hd, dk + j0 * hd, hd, w, seen_by);
        }
    }
}

}  // namespace

Tensor tiled_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale,
                              std::int64_t diagonal) {
    const profiler::OpScope scope("tiled_causal_attention", q, k, v);
    const detail::AttentionSizes s = detail::check_qkv(q, k, &v, "tiled_causal_attention");
    Problem p;
    p.Tq = s.Tq, p.Tk = s.Tk, p.hd = s.hd, p.hv = s.hv;
    p.scale = detail::attention_scale(scale, s.hd, "tiled_causal_attention");
    p.diagonal = std::clamp(diagonal, -std::int64_t(s.Tq), std::int64_t(s.Tk));
    p.N = 1;  // B·H matrices
    for (std::size_t n : s.lead) p.N *= n;
    ArrayShape ys = array_shape(q.data()), ls = s.lead;
    ys.back() = s.hv;
    ls.push_back(s.Tq);
    Array out(ys), lse(ls);  // lse: L (..., Tq), the one array saved for backward
    const real *pq = q.data().data(), *pk = k.data().data(), *pv = v.data().data();
    // Work items (n, query block). The causal rows grow longer down a matrix, so the blocks are
    // dealt in zigzag order (0, last, 1, last − 1, ...): each thread's contiguous chunk of items
    // gets long and short rows alike.
    const std::size_t nqb = (p.Tq + kQueryBlock - 1) / kQueryBlock;
    parallel_for(p.N * nqb, 1, [&](std::size_t t0, std::size_t t1) {
        Scratch w;
        for (std::size_t t = t0; t < t1; ++t) {
            const std::size_t n = t / nqb, z = t % nqb, b = z % 2 == 0 ? z / 2 : nqb - 1 - z / 2;
            const std::size_t i0 = b * kQueryBlock, i1 = std::min(i0 + kQueryBlock, p.Tq);
            forward_rows(p, pq + n * p.Tq * p.hd, pk + n * p.Tk * p.hd, pv + n * p.Tk * p.hv, i0, i1,
                         out.data() + n * p.Tq * p.hv, lse.data() + n * p.Tq, w);
        }
    });
    return make_result(std::move(out), "tiled_causal_attention", {q, k, v},
                       [q, k, v, p, lse = std::move(lse)](const Array& g, const Array& y) {
                           Array dq(q.data().shape()), dk(k.data().shape()), dv(v.data().shape());
                           const real *pq = q.data().data(), *pk = k.data().data(), *pv = v.data().data();
                           // One matrix per item: dk and dv sum over every query block, in one order.
                           parallel_for(p.N, 1, [&](std::size_t n0, std::size_t n1) {
                               Scratch w;
                               for (std::size_t n = n0; n < n1; ++n) {
                                   const std::size_t oq = n * p.Tq, ok = n * p.Tk;
                                   backward_matrix(p, pq + oq * p.hd, pk + ok * p.hd, pv + ok * p.hv,
                                                   y.data() + oq * p.hv, g.data() + oq * p.hv, lse.data() + oq,
                                                   dq.data() + oq * p.hd, dk.data() + ok * p.hd,
                                                   dv.data() + ok * p.hv, w);
                               }
                           });
                           return make_grads(std::move(dq), std::move(dk), std::move(dv));
                       });
}

}  // namespace xgrad::nn::functional
