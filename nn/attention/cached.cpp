// nn/attention/cached.cpp — attention of new queries against a KV cache, without a graph.
// Legend and oracle as in cached.hpp. For each (b, h), with kv = h / g and the cache's rows
// K, V (P + t, hd) of head kv (contiguous in the (B, Hkv, max_len, hd) arrays):
//   S (t, P + t)  = scale · q (t, hd) · Kᵀ              one gemm
//   W             = softmax of row i over its keys j ≤ P + i, 0 after them
//   out (t, hd)   = W · V                               one gemm, row i summing over j ≤ P + i only
// With t = 1 (one generated token) S is one row and every key is visible.
#include <xgrad/nn/attention/cached.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/nn/attention/detail/shape.hpp>
#include <xgrad/nn/kv_cache.hpp>

namespace xgrad::nn {

namespace functional {

Tensor cached_causal_attention(const Tensor& q, const KVCache& cache, std::optional<double> scale_opt) {
    const char* op = "cached_causal_attention";
    check(cache.length() > 0, op, "the cache is empty: append the new positions' k and v first");
    check(q.defined() && q.dim() == 4, op, "q must be (B, H, t, hd); got {}",
          q.defined() ? shape_str(q.shape()) : std::string("an undefined tensor"));
    check(!(grad_enabled() && q.requires_grad()), op,
          "records no graph: run it under NoGradGuard (generation), not on a q that requires grad");
    const ArrayShape qs = array_shape(q.data()), cs = array_shape(cache.keys());
    const std::size_t B = qs[0], H = qs[1], t = qs[2], hd = qs[3], Hkv = cs[1], max_len = cs[2];
    const std::size_t L = std::size_t(cache.length());  // P + t keys
    check(B == cs[0] && hd == cs[3], op, "q {} does not match the cache's (B, Hkv, ·, hd) = ({}, {}, ·, {})",
          shape_str(qs), cs[0], cs[1], cs[3]);
    check(H % Hkv == 0, op, "q's {} heads are not a multiple of the cache's {} K/V heads", H, Hkv);
    check(t >= 1 && t <= L, op, "q has {} positions; the cache holds {} (the queries' own included)", t, L);
    const std::size_t g = H / Hkv, P = L - t;
    const real scale = detail::attention_scale(scale_opt, hd, op);
    Array out = Array::from_shape(qs);
    const real* pq = q.data().data();
    const real* pk = cache.keys().data();
    const real* pv = cache.values().data();
    // The B·H (query head) matrices are shared out over the threads.
    parallel_for(B * H, 1, [&](std::size_t n0, std::size_t n1) {
        std::vector<real> S(t * L);
        for (std::size_t n = n0; n < n1; ++n) {
            const std::size_t b = n / H, kv = (n % H) / g;  // query head h reads K/V head h / g
            const real* K = pk + (b * Hkv + kv) * max_len * hd;
            const real* V = pv + (b * Hkv + kv) * max_len * hd;
            // S (t, L) = scale · q (t, hd) · Kᵀ (hd, L)
            gemm(false, true, t, L, hd, scale, pq + n * t * hd, hd, K, hd, 0, S.data(), L);
            // row i (position P + i) keeps keys 0 .. P + i; the later ones get weight exactly 0
            for (std::size_t i = 0; i < t; ++i) {
                real* row = S.data() + i * L;
                softmax_row(row, row, P + i + 1);
                std::fill(row + P + i + 1, row + L, real(0));
            }
            // out (t, hd) = W (t, L) · V (L, hd), row i over its keys only (a later NaN stays out)
            gemm_visible(false, false, t, hd, L, 1, S.data(), L, V, hd, out.data() + n * t * hd, hd,
                         [P](std::size_t i, std::size_t j) { return j <= P + i; });
        }
    });
    return Tensor(std::move(out));
}

}  // namespace functional
}  // namespace xgrad::nn
