// nn/kv_cache.hpp — generation with a KV cache: the keys and values of past tokens, kept.
//
// A causal model's key and value at position j depend on tokens 0..j only, so they are the same at
// every later step. Without a cache, generating token n + 1 reruns the model over all n tokens (n
// rows through every Linear and n² scores per head, for one new row of logits). With it, a step
// runs the model on the new token alone: its q, k, v, the k and v appended here, and one row of n
// scores against the cached keys.
//
// Legend: B batch, H query heads, Hkv key/value heads (Hkv divides H; the g = H / Hkv query heads
// h = kv·g .. kv·g + g − 1 share K/V head kv, grouped-query attention), P positions held, t new
// positions, hd head width.
// Memory: 2 (k and v) · B · Hkv · hd · sizeof(real) bytes per cached position and layer, so Hkv < H
// divides it by g.
//
// A generation loop, one cache per layer (examples/gpt/generate.cpp is the whole of it):
//     caches[l] = KVCache(block)                      for every layer l
//     logits = model.forward_cached(prompt, caches)   (B, P, V): the prompt fills the caches
//     repeat: draw id from logits[:, -1]; logits = model.forward_cached(id (B, 1), caches)
// Past the block the context must be cropped to the last `block` tokens, and then no cached key
// is valid any more (each token's position, and what the oldest token saw, changed): clear()
// every cache and refill it from the cropped window. A larger cache that is never cropped runs
// without error but computes another model than the one trained at `block`.
// ref: Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2; Ainslie et al. 2023, "GQA".
#pragma once

#include <cstdint>
#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {

// The keys and values of one attention layer, positions 0 .. length() − 1, stored as
// (B, Hkv, max_len, hd) arrays of which the first length() positions are valid.
class KVCache {
public:
    // max_len: the most positions it may hold (a model's block). Throws ValueError if max_len < 1.
    explicit KVCache(std::int64_t max_len);

    // Appends k_new, v_new (B, Hkv, t, hd), t ≥ 1. The first append fixes B, Hkv and hd and allocates
    // bytes(). Throws ValueError if they differ from k_new's, the shapes of k_new and v_new differ, or
    // length() + t would pass max_len() (crop the context, clear() and refill: see the top).
    void append(const Array& k_new, const Array& v_new);
    // Forgets the positions (length 0) and keeps the allocation for the next sequence.
    void clear() { length_ = 0; }

    std::int64_t length() const { return std::int64_t(length_); }  // P
    std::int64_t max_len() const { return std::int64_t(max_len_); }
    std::size_t bytes() const;                                       // allocated by k and v, bytes
    const Array& keys() const { return k_; }                         // (B, Hkv, max_len, hd)
    const Array& values() const { return v_; }                       // (B, Hkv, max_len, hd)

private:
    std::size_t max_len_, length_ = 0;
    Array k_, v_;
};

namespace functional {

// Causal attention of t new queries against a cache that already holds them, without a graph:
//     out[b, h, i] = Σ_{j ≤ P + i} softmax_j(scale · q[b, h, i] · k[b, h / g, j]) · v[b, h / g, j]
// where P = cache.length() − t is the position of the first query (append k, v first). The
// causal triangle is aligned bottom-right: the last query sees every key.
//   q (B, H, t, hd), real; H a multiple of the cache's Hkv. scale defaults to 1/√hd.
// Oracle: scaled_dot_product_attention(q, k repeated g times, v repeated, keep[i, j] = j ≤ P + i),
// held equal by tests/nn/test_kv_cache.cpp.
// Throws ValueError for an empty cache, q not (B, H, t, hd) with the cache's B and hd, H not a
// multiple of Hkv, t above the cache's length, or a q that requires grad while grad mode is on
// (the cache is for inference: run under NoGradGuard).
Tensor cached_causal_attention(const Tensor& q, const KVCache& cache, std::optional<double> scale = std::nullopt);

}  // namespace functional
}  // namespace xgrad::nn
