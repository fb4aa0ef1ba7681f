// nn/attention/cached.hpp — causal attention of new queries against a KV cache (generation).
// Legend: B batch, H query heads, Hkv key/value heads (dividing H; query head h reads K/V head
// h / g, g = H / Hkv), P positions cached before the t new ones, hd head width.
// ref: Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2; Ainslie et al. 2023, "GQA".
#pragma once

#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {

class KVCache;  // nn/kv_cache.hpp

namespace functional {

// Causal attention of t new queries against a cache that already holds them, without a graph:
//     out[b, h, i] = Σ_{j ≤ P + i} softmax_j(scale · q[b, h, i] · k[b, h / g, j]) · v[b, h / g, j]
// where P = cache.length() − t is the position of the first query (append k, v first). The
// causal triangle is aligned bottom-right: the last query sees every key.
//   q (B, H, t, hd), real; H a multiple of the cache's Hkv. scale defaults to 1/√hd.
// Oracle: scaled_dot_product_attention(q, k repeated g times, v repeated, keep[i, j] = j ≤ P + i),
// held equal by tests/nn/attention/test_cached.cpp.
// Throws ValueError for an empty cache, q not (B, H, t, hd) with the cache's B and hd, H not a
// multiple of Hkv, t above the cache's length, a NaN or infinite scale, or a q that requires grad while grad mode is on
// (the cache is for inference: run under NoGradGuard).
Tensor cached_causal_attention(const Tensor& q, const KVCache& cache, std::optional<double> scale = std::nullopt);

}  // namespace functional
}  // namespace xgrad::nn
