// tests/nn/gradcheck_attention_tiled.cpp — the tiled causal kernel of nn/attention_tiled.cpp on its
// own (its values against the composed oracle are in test_attention_tiled.cpp).
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_attention_tiled && build/tests/gradcheck_attention_tiled`.
#include <catch2/catch.hpp>

#include <vector>

#include <xgrad/nn/attention_tiled.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

// Sizes across the 64-row tiles (70 queries or keys: a whole tile and a partial one), Tq ≠ Tk
// both ways, and the three alignments of the triangle: top-left, bottom-right, and cut off so
// that the first rows see no key.
TEST_CASE("tiled_causal_attention: gradcheck across tiles, with Tq != Tk and each diagonal") {
    manual_seed(43);
    Tensor q = leaf({70, 3}), k = leaf({66, 3}), v = leaf({66, 2});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::tiled_causal_attention(in[0], in[1], in[2], 0.8); },
                      q, k, v);  // Tq 70 > Tk 66, top-left
    Tensor q2 = leaf({2, 66, 3}), k2 = leaf({2, 70, 3}), v2 = leaf({2, 70, 2});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) {
        return F::tiled_causal_attention(in[0], in[1], in[2], std::nullopt, /*diagonal=*/70 - 66);
    }, q2, k2, v2);  // Tq 66 < Tk 70, bottom-right
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) {
        return F::tiled_causal_attention(in[0], in[1], in[2], std::nullopt, /*diagonal=*/-3);
    }, q2, k2, v2);  // rows 0..2 see no key
}
