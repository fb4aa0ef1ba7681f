// tests/nn/attention/test_cached.cpp — cached_causal_attention (nn/attention/cached.cpp), float32.
//
//   * against its oracle, scaled_dot_product_attention on the repeated K/V heads with the
//     bottom-right causal mask, for t = 1 and t > 1 and Hkv = 1, 2, 4;
//   * a NaN in a later key or value reaches no earlier query;
//   * refusals, and a q that requires grad while grad mode is on.
#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/cached.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

namespace {

// (B, Hkv, T, hd) → (B, Hkv·g, T, hd), head h = K/V head h / g (the oracle's repeat, by hand).
Tensor repeat_heads(const Tensor& t, std::int64_t g) {
    std::vector<Tensor> heads;
    for (std::int64_t kv = 0; kv < t.size(1); ++kv)
        for (std::int64_t r = 0; r < g; ++r) heads.push_back(narrow(t, 1, kv, 1));
    return concat(heads, 1);
}

// keep (t, L): query i (position L − t + i) sees keys j ≤ L − t + i.
Tensor bottom_right_causal(std::int64_t t, std::int64_t L) {
    Array keep = Array::from_shape({std::size_t(t), std::size_t(L)});
    for (std::int64_t i = 0; i < t; ++i)
        for (std::int64_t j = 0; j < L; ++j) keep(i, j) = j <= L - t + i ? 1 : 0;
    return Tensor(std::move(keep));
}

}  // namespace

TEST_CASE("cached_causal_attention equals sdpa on repeated K/V heads with the bottom-right mask", "[kv_cache]") {
    manual_seed(7);
    const std::int64_t B = 2, H = 4, hd = 8, L = 6;
    NoGradGuard no_grad;
    for (std::int64_t Hkv : {1, 2, 4}) {
        for (std::int64_t t : {1, 3, 6}) {
            INFO("Hkv " << Hkv << ", t " << t);
            const Tensor k = randn({B, Hkv, L, hd}), v = randn({B, Hkv, L, hd}), q = randn({B, H, t, hd});
            nn::KVCache cache(9);
            if (L > t) cache.append(narrow(k, 2, 0, L - t).data(), narrow(v, 2, 0, L - t).data());
            cache.append(narrow(k, 2, L - t, t).data(), narrow(v, 2, L - t, t).data());
            const Tensor got = F::cached_causal_attention(q, cache);
            const Tensor want = F::scaled_dot_product_attention(q, repeat_heads(k, H / Hkv), repeat_heads(v, H / Hkv),
                                                                bottom_right_causal(t, L));
            require_values(got, want, 1e-5);
        }
    }
}

TEST_CASE("cached_causal_attention: a NaN in a later key or value reaches no earlier query", "[kv_cache]") {
    manual_seed(3);
    NoGradGuard no_grad;
    Tensor k = randn({1, 1, 4, 2}), v = randn({1, 1, 4, 2});
    const Tensor q = randn({1, 2, 3, 2});  // 3 new queries at positions 1, 2, 3; H 2 share the one K/V head
    k.mutable_data()(0, 0, 3, 0) = kNaN;   // position 3: seen by the last query only
    v.mutable_data()(0, 0, 3, 1) = kNaN;
    nn::KVCache cache(4);
    cache.append(k.data(), v.data());
    const Tensor out = F::cached_causal_attention(q, cache);  // (1, 2, 3, 2)
    for (std::size_t h = 0; h < 2; ++h) {
        for (std::size_t i = 0; i < 2; ++i) REQUIRE(std::isfinite(out.data()(0, h, i, 0)));
        REQUIRE(std::isnan(out.data()(0, h, 2, 0)));
    }
}

TEST_CASE("cached_causal_attention: refusals", "[kv_cache]") {
    nn::KVCache cache(4);
    NoGradGuard no_grad;
    REQUIRE_THROWS_WITH(F::cached_causal_attention(randn({1, 2, 1, 4}), cache), Catch::Contains("the cache is empty"));
    cache.append(randn({1, 2, 2, 4}).data(), randn({1, 2, 2, 4}).data());
    REQUIRE_THROWS_WITH(F::cached_causal_attention(randn({1, 3, 1, 4}), cache),
                        Catch::Contains("3 heads are not a multiple of the cache's 2"));
    REQUIRE_THROWS_WITH(F::cached_causal_attention(randn({1, 2, 1, 5}), cache), Catch::Contains("does not match"));
    REQUIRE_THROWS_WITH(F::cached_causal_attention(randn({1, 2, 3, 4}), cache),
                        Catch::Contains("3 positions; the cache holds 2"));
}

TEST_CASE("cached_causal_attention refuses a q that requires grad while grad mode is on", "[kv_cache]") {
    nn::KVCache cache(2);
    cache.append(randn({1, 1, 1, 2}).data(), randn({1, 1, 1, 2}).data());
    REQUIRE_THROWS_WITH(F::cached_causal_attention(randn({1, 1, 1, 2}, true), cache),
                        Catch::Contains("NoGradGuard"));
}
