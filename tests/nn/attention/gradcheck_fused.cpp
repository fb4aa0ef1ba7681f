// tests/nn/attention/gradcheck_fused.cpp — the fused causal kernel of nn/attention/fused.cpp on its
// own (its values against the composed oracle are in test_fused.cpp).
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_fused && build/tests/gradcheck_fused`.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

// The fused kernel (nn/attention/fused.cpp) on its own, with Tq ≠ Tk both ways and a given
// scale: the cases the model's square T × T attention does not reach.
TEST_CASE("fused_causal_attention: gradcheck with Tq != Tk and a scale") {
    manual_seed(41);
    Tensor q = leaf({2, 5, 3}), k = leaf({2, 4, 3}), v = leaf({2, 4, 6}), v5 = leaf({2, 5, 6});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::fused_causal_attention(in[0], in[1], in[2], 0.8); },
                      q, k, v);  // Tq 5 > Tk 4
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::fused_causal_attention(in[0], in[1], in[2]); },
                      k, q, v5);  // Tq 4 < Tk 5, scale 1/√hd
}

// The packed form on its own: every head reads and writes its own columns of qkv, so a wrong
// offset or leading dimension shows as a wrong column of dL/dqkv.
TEST_CASE("fused_causal_attention_packed: gradcheck with two batches, three heads and a scale") {
    manual_seed(43);
    Tensor qkv = leaf({2, 4, 3 * 3 * 2});  // B 2, T 4, H 3, hd 2
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::fused_causal_attention_packed(in[0], 3, 0.9); },
                      qkv);
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::fused_causal_attention_packed(in[0], 1); }, qkv);
}
