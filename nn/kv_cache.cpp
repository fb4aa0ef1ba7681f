// nn/kv_cache.cpp — the cache's storage, and attention of new queries against it.
// Legend and oracle as in nn/kv_cache.hpp. For each (b, h), with kv = h / g and the cache's rows
// K, V (P + t, hd) of head kv (contiguous in the (B, Hkv, max_len, hd) arrays):
//   S (t, P + t)  = scale · q (t, hd) · Kᵀ              one gemm
//   W             = softmax of row i over its keys j ≤ P + i, 0 after them
//   out (t, hd)   = W · V                               one gemm, row i summing over j ≤ P + i only
// With t = 1 (one generated token) S is one row and every key is visible.
#include <xgrad/nn/kv_cache.hpp>

#include <algorithm>
#include <cmath>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/softmax.hpp>

namespace xgrad::nn {

KVCache::KVCache(std::int64_t max_len) : max_len_(std::size_t(std::max<std::int64_t>(max_len, 0))) {
    check(max_len >= 1, "KVCache", "max_len must be >= 1; got {}", max_len);
}

// A default xarray is 0-d with one element: the cache is allocated once k_ has its 4 dims.
std::size_t KVCache::bytes() const { return k_.dimension() == 4 ? (k_.size() + v_.size()) * sizeof(real) : 0; }

void KVCache::append(const Array& k_new, const Array& v_new) {
    const char* op = "KVCache::append";
    const ArrayShape s = array_shape(k_new);
    check(s.size() == 4 && s[2] >= 1 && s[3] >= 1 && s[0] >= 1 && s[1] >= 1, op,
          "k must be (B, Hkv, t, hd) with every size >= 1; got {}", shape_str(s));
    check(array_shape(v_new) == s, op, "k and v must have the same shape; got k {} and v {}", shape_str(s),
          shape_str(array_shape(v_new)));
    const std::size_t B = s[0], Hkv = s[1], t = s[2], hd = s[3];
    if (k_.dimension() != 4) {  // the first append fixes B, Hkv and hd: allocate every position now
        const double elements = double(B) * double(Hkv) * double(max_len_) * double(hd);
        check(2 * elements * sizeof(real) < 0x1p62, op,
              "k and v of (B, Hkv, max_len, hd) = ({}, {}, {}, {}) would need {:.3g} bytes", B, Hkv, max_len_, hd,
              2 * elements * sizeof(real));
        k_ = Array::from_shape({B, Hkv, max_len_, hd});
        v_ = Array::from_shape({B, Hkv, max_len_, hd});
    }
    const ArrayShape c = array_shape(k_);
    check(c[0] == B && c[1] == Hkv && c[3] == hd, op,
          "the cache holds (B, Hkv, ·, hd) = ({}, {}, ·, {}); got k {}: clear() keeps the sizes, use a new KVCache",
          c[0], c[1], c[3], shape_str(s));
    check(length_ + t <= max_len_, op,
          "{} positions + {} new would pass max_len {}: crop the context to the last max_len tokens, clear() "
          "the cache and refill it from them",
          length_, t, max_len_);
    // k_[b, kv, length_ + i, :] = k_new[b, kv, i, :]: one contiguous run of t·hd values per (b, kv)
    for (std::size_t bk = 0; bk < B * Hkv; ++bk) {
        const std::size_t dst = (bk * max_len_ + length_) * hd, src = bk * t * hd;
        std::copy_n(k_new.data() + src, t * hd, k_.data() + dst);
        std::copy_n(v_new.data() + src, t * hd, v_.data() + dst);
    }
    length_ += t;
}

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
    const real scale = static_cast<real>(scale_opt.value_or(1.0 / std::sqrt(double(hd))));
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
