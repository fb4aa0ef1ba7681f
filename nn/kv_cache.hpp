// nn/kv_cache.hpp — generation with a KV cache: the keys and values of past tokens, kept.
// A causal model's key and value at position j depend on tokens 0..j only, so a generation step
// runs the model on the new token alone and attends over the cached keys (the kernel:
// nn/attention/cached.hpp). Why, and why the cache is refilled past the block:
// examples/gpt/README.md, "Generation: the KV cache"; the loop: examples/gpt/generate.cpp.
// Legend: B batch, Hkv key/value heads, P positions held, t new positions, hd head width.
// Memory: 2 (k and v) · B · Hkv · hd · sizeof(real) bytes per cached position and layer.
// ref: Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2; Ainslie et al. 2023, "GQA".
#pragma once

#include <cstdint>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/attention/cached.hpp>  // cached_causal_attention, the kernel that reads the cache

namespace xgrad::nn {

// The keys and values of one attention layer, positions 0 .. length() − 1, stored as
// (B, Hkv, max_len, hd) arrays of which the first length() positions are valid.
class KVCache {
public:
    // max_len: the most positions it may hold (a model's block). Throws ValueError if max_len < 1.
    explicit KVCache(std::int64_t max_len);
    // One empty cache per layer; std::vector<KVCache>(n) does not compile (no default max_len).
    // Throws ValueError if n_layers < 0 or max_len < 1, OutOfMemoryError if the caches do not fit.
    static std::vector<KVCache> per_layer(std::int64_t n_layers, std::int64_t max_len);

    // Appends k_new, v_new (B, Hkv, t, hd), t ≥ 1. The first append fixes B, Hkv and hd and allocates
    // bytes(). Throws ValueError if they differ from k_new's, the shapes of k_new and v_new differ, or
    // length() + t would pass max_len() (crop the context, clear() and refill: examples/gpt/generate.cpp).
    // A refused append changes nothing: no positions, no allocation, no sizes fixed.
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

}  // namespace xgrad::nn
