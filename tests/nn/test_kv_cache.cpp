// tests/nn/test_kv_cache.cpp — nn/kv_cache and CausalSelfAttention's cached forward (float32).
// The kernel that reads the cache, cached_causal_attention: tests/nn/attention/test_cached.cpp.
//
//   * KVCache: append copies each (b, kv) run to its place; bytes; clear; refusals; per_layer;
//   * CausalSelfAttention::forward_cached over a sequence fed in pieces equals forward() on the
//     whole, for both projection layouts, rope on and off, and every Hkv;
//   * grouped-query attention: Hkv = 1 equals multi-head attention with every head's K/V copied.
#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

TEST_CASE("KVCache: append places each head's rows after the cached ones", "[kv_cache]") {
    nn::KVCache cache(5);
    REQUIRE(cache.bytes() == 0);
    const Tensor k1 = counting({1, 2, 2, 3}), v1 = k1 * 10;  // B 1, Hkv 2, t 2, hd 3
    cache.append(k1.data(), v1.data());
    REQUIRE(cache.length() == 2);
    REQUIRE(cache.bytes() == 2 * 1 * 2 * 5 * 3 * sizeof(real));  // k and v, (1, 2, 5, 3) each
    const Tensor k2 = counting({1, 2, 1, 3}) + 100;
    cache.append(k2.data(), k2.data());
    REQUIRE(cache.length() == 3);
    const Array& K = cache.keys();
    // head 1: positions 0, 1 are k1's rows 4..6 and 7..9 (values 1-based), position 2 is k2's 104..106
    REQUIRE(K(0, 1, 0, 0) == 7);
    REQUIRE(K(0, 1, 1, 2) == 12);
    REQUIRE(K(0, 1, 2, 0) == 104);
    REQUIRE(K(0, 0, 2, 2) == 103);
    REQUIRE(cache.values()(0, 1, 1, 2) == 120);
    cache.clear();
    REQUIRE(cache.length() == 0);
    REQUIRE(cache.bytes() == 2 * 1 * 2 * 5 * 3 * sizeof(real));  // the allocation stays
}

TEST_CASE("KVCache::per_layer: one empty cache per layer, each of max_len positions", "[kv_cache]") {
    std::vector<nn::KVCache> caches = nn::KVCache::per_layer(3, 5);
    REQUIRE(caches.size() == 3);
    for (const nn::KVCache& c : caches) REQUIRE((c.length() == 0 && c.max_len() == 5 && c.bytes() == 0));
    caches[0].append(ones({1, 1, 2, 4}).data(), ones({1, 1, 2, 4}).data());  // the caches do not share storage
    REQUIRE((caches[0].length() == 2 && caches[1].length() == 0 && caches[1].bytes() == 0));
    REQUIRE(nn::KVCache::per_layer(0, 5).empty());
    REQUIRE_THROWS_WITH(nn::KVCache::per_layer(-1, 5), Catch::Contains("n_layers must be >= 0"));
    REQUIRE_THROWS_WITH(nn::KVCache::per_layer(2, 0), Catch::Contains("max_len must be >= 1"));
    // more caches than a vector can index: refused before any allocation (an allocation that fails,
    // the bad_alloc path, would abort the sanitizer build's allocator instead of returning)
    for (std::int64_t n : {std::int64_t(1) << 62, std::numeric_limits<std::int64_t>::max()})
        REQUIRE_THROWS_WITH(nn::KVCache::per_layer(n, 5), Catch::Contains("KVCache::per_layer") &&
                                                             Catch::Contains("do not fit in memory"));
}

TEST_CASE("KVCache: refusals name the sizes", "[kv_cache]") {
    REQUIRE_THROWS_WITH(nn::KVCache(0), Catch::Contains("max_len must be >= 1; got 0"));
    nn::KVCache cache(3);
    const Array k = counting({1, 2, 2, 4}).data();
    REQUIRE_THROWS_WITH(cache.append(k, counting({1, 2, 2, 3}).data()), Catch::Contains("same shape"));
    REQUIRE_THROWS_WITH(cache.append(counting({2, 4}).data(), counting({2, 4}).data()),
                        Catch::Contains("(B, Hkv, t, hd)"));
    cache.append(k, k);
    REQUIRE_THROWS_WITH(cache.append(k, k), Catch::Contains("2 positions + 2 new would pass max_len 3"));
    const Array other = counting({1, 1, 1, 4}).data();
    REQUIRE_THROWS_WITH(cache.append(other, other), Catch::Contains("use a new KVCache"));
    REQUIRE(cache.length() == 2);  // a refused append changes nothing
    nn::KVCache huge(std::int64_t(1) << 62);  // (1, 1, 2^62, 4): the byte count would wrap
    REQUIRE_THROWS_WITH(huge.append(counting({1, 1, 1, 4}).data(), counting({1, 1, 1, 4}).data()),
                        Catch::Contains("would need 1.48e+20 bytes"));
}


// A first append refused for its length allocates nothing and fixes no sizes: the next append,
// with other B, Hkv and hd, is accepted, and an empty cache reports 0 bytes.
TEST_CASE("KVCache: a refused first append changes nothing", "[kv_cache][regression]") {
    nn::KVCache cache(3);
    const Array long_k = counting({2, 2, 4, 8}).data();  // t = 4 > max_len 3
    REQUIRE_THROWS_WITH(cache.append(long_k, long_k), Catch::Contains("0 positions + 4 new would pass max_len 3"));
    REQUIRE(cache.bytes() == 0);
    REQUIRE(cache.length() == 0);
    const Array k = counting({1, 1, 2, 4}).data();
    REQUIRE_NOTHROW(cache.append(k, k));
    REQUIRE(cache.length() == 2);
    REQUIRE(cache.bytes() == 2 * 1 * 1 * 3 * 4 * sizeof(real));
    REQUIRE(cache.keys()(0, 0, 1, 3) == 8);
}

TEST_CASE("CausalSelfAttention: forward_cached in pieces equals forward on the whole sequence", "[kv_cache]") {
    const std::int64_t B = 2, T = 7, d = 16, H = 4;
    for (bool llama_names : {false, true}) {
        for (bool rope : {false, true}) {
            for (std::int64_t Hkv : {1, 2, 4}) {
                INFO("llama_names " << llama_names << ", rope " << rope << ", Hkv " << Hkv);
                manual_seed(11);
                const nn::CausalSelfAttention attn(
                    d, H, nn::CausalSelfAttentionOptions().rope(rope).n_kv_head(Hkv).llama_names(llama_names));
                const Tensor x = randn({B, T, d});
                const Tensor whole = attn.forward(x);  // (B, T, d)
                nn::KVCache cache(T);
                std::vector<Tensor> pieces;
                for (auto [start, len] : {std::pair<int, int>{0, 3}, {3, 1}, {4, 2}, {6, 1}})
                    pieces.push_back(attn.forward_cached(narrow(x, 1, start, len), cache));
                REQUIRE(cache.length() == T);
                REQUIRE(cache.bytes() == std::size_t(2 * B * Hkv * T * (d / H)) * sizeof(real));
                require_values(concat(pieces, 1), whole, 1e-5);
                REQUIRE_FALSE(pieces[0].requires_grad());
                REQUIRE_THROWS_WITH(attn.forward_cached(narrow(x, 1, 0, 1), cache), Catch::Contains("max_len 7"));
            }
        }
    }
}

TEST_CASE("grouped-query attention with one K/V head is multi-head attention with that head copied", "[kv_cache]") {
    manual_seed(5);
    const std::int64_t d = 8, H = 2, hd = 4;
    const nn::CausalSelfAttention mqa(d, H, nn::CausalSelfAttentionOptions().n_kv_head(1));
    const nn::CausalSelfAttention mha(d, H);
    REQUIRE(mqa.c_attn->weight.shape() == Shape{d + 2 * hd, d});  // q (d) | k (hd) | v (hd)
    // mha's c_attn rows [q | k | v] = [q | k k | v v]: each head gets the one K/V head's rows
    NoGradGuard no_grad;
    const Tensor W = mqa.c_attn->weight, b = mqa.c_attn->bias;
    auto q = [](const Tensor& t) { return narrow(t, 0, 0, 8); };
    auto k = [](const Tensor& t) { return narrow(t, 0, 8, 4); };
    auto v = [](const Tensor& t) { return narrow(t, 0, 12, 4); };
    mha.c_attn->weight.set_data(concat({q(W), k(W), k(W), v(W), v(W)}, 0).data());
    mha.c_attn->bias.set_data(concat({q(b), k(b), k(b), v(b), v(b)}, 0).data());
    mha.c_proj->weight.set_data(mqa.c_proj->weight.data());
    mha.c_proj->bias.set_data(mqa.c_proj->bias.data());
    const Tensor x = randn({2, 5, d});
    require_values(mqa.forward(x), mha.forward(x), 1e-5);
    REQUIRE_THROWS_WITH(nn::CausalSelfAttention(d, 4, nn::CausalSelfAttentionOptions().n_kv_head(3)),
                        Catch::Contains("n_kv_head (3) must divide n_head (4)"));
}
