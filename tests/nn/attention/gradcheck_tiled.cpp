// tests/nn/attention/gradcheck_tiled.cpp — the tiled causal kernel of nn/attention/tiled.cpp on its
// own (its values against the composed oracle are in test_tiled.cpp).
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_tiled && build/tests/gradcheck_tiled`.
#include <catch2/catch.hpp>

#include <vector>

#include <xgrad/nn/attention/tiled.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

// Sizes across the tiles (forward 64 queries × 256 keys, backward 256 queries × 64 keys: 70 and
// 260 cross both), Tq ≠ Tk both ways, and the three alignments of the triangle: top-left,
// bottom-right, and cut off so that the first rows see no key.
TEST_CASE("tiled_causal_attention: gradcheck across tiles, with Tq != Tk and each diagonal") {
    manual_seed(43);
    Tensor q = leaf({260, 2}), k = leaf({70, 2}), v = leaf({70, 2});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::tiled_causal_attention(in[0], in[1], in[2], 0.8); },
                      q, k, v);  // Tq 260 > Tk 70, top-left
    Tensor q2 = leaf({70, 2}), k2 = leaf({260, 2}), v2 = leaf({260, 2});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) {
        return F::tiled_causal_attention(in[0], in[1], in[2], std::nullopt, /*diagonal=*/260 - 70);
    }, q2, k2, v2);  // Tq 70 < Tk 260, bottom-right
    Tensor q3 = leaf({2, 66, 3}), k3 = leaf({2, 70, 3}), v3 = leaf({2, 70, 2});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) {
        return F::tiled_causal_attention(in[0], in[1], in[2], std::nullopt, /*diagonal=*/-3);
    }, q3, k3, v3);  // rows 0..2 see no key
}
