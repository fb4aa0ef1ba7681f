// nn/kv_cache.cpp — the cache's storage: positions appended in place, one allocation.
// The kernel that reads it is nn/attention/cached.cpp.
#include <xgrad/nn/kv_cache.hpp>

#include <algorithm>
#include <new>
#include <utility>

#include <fmt/format.h>

namespace xgrad::nn {

KVCache::KVCache(std::int64_t max_len) : max_len_(std::size_t(std::max<std::int64_t>(max_len, 0))) {
    check(max_len >= 1, "KVCache", "max_len must be >= 1; got {}", max_len);
}

std::vector<KVCache> KVCache::per_layer(std::int64_t n_layers, std::int64_t max_len) {
    const char* op = "KVCache::per_layer";
    check(n_layers >= 0, op, "n_layers must be >= 0; got {}", n_layers);
    const KVCache empty(max_len);
    const OutOfMemoryError too_many(fmt::format("{}: {} caches do not fit in memory", op, n_layers));
    if (std::size_t(n_layers) > std::vector<KVCache>().max_size()) throw too_many;
    try {
        return std::vector<KVCache>(std::size_t(n_layers), empty);
    } catch (const std::bad_alloc&) {
        throw too_many;
    }
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
    // Every check before the first write: a refused append changes nothing (not even the sizes).
    const bool allocated = k_.dimension() == 4;  // the first append fixes B, Hkv and hd
    if (allocated) {
        const ArrayShape c = array_shape(k_);
        check(c[0] == B && c[1] == Hkv && c[3] == hd, op,
              "the cache holds (B, Hkv, ·, hd) = ({}, {}, ·, {}); got k {}: clear() keeps the sizes, use a new "
              "KVCache", c[0], c[1], c[3], shape_str(s));
    }
    check(length_ + t <= max_len_, op,
          "{} positions + {} new would pass max_len {}: crop the context to the last max_len tokens, clear() "
          "the cache and refill it from them",
          length_, t, max_len_);
    if (!allocated) {  // every position now; k_ and v_ change only once both are allocated
        const double elements = double(B) * double(Hkv) * double(max_len_) * double(hd);
        check(2 * elements * sizeof(real) < 0x1p62, op,
              "k and v of (B, Hkv, max_len, hd) = ({}, {}, {}, {}) would need {:.3g} bytes", B, Hkv, max_len_, hd,
              2 * elements * sizeof(real));
        Array k = Array::from_shape({B, Hkv, max_len_, hd}), v = Array::from_shape({B, Hkv, max_len_, hd});
        k_ = std::move(k), v_ = std::move(v);
    }
    // k_[b, kv, length_ + i, :] = k_new[b, kv, i, :]: one contiguous run of t·hd values per (b, kv)
    for (std::size_t bk = 0; bk < B * Hkv; ++bk) {
        const std::size_t dst = (bk * max_len_ + length_) * hd, src = bk * t * hd;
        std::copy_n(k_new.data() + src, t * hd, k_.data() + dst);
        std::copy_n(v_new.data() + src, t * hd, v_.data() + dst);
    }
    length_ += t;
}

}  // namespace xgrad::nn
