// tests/nn/gradcheck_positional.cpp — apply_rotary's backward (the rotation by −angle)
// against finite differences, on its own and inside attention-like scores; and the
// sinusoidal / learned position modules' gradients.
//
// Built against xgrad_f64 (real = double; see core/gradcheck.hpp).
// Legend: B batch, H heads, T time, d width, hd head width.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck apply_rotary (B H T hd) on its own", "[gradcheck][positional][rope]") {
    Tensor x = leaf({2, 3, 4, 6});  // (B, H, T, hd)
    const IndexTensor positions{0, 1, 5, 300};
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::apply_rotary(in[0], positions); }, x);
    // Another base, 2-D x, repeated positions.
    Tensor x2 = leaf({3, 8});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return nn::apply_rotary(in[0], IndexTensor{2, 2, 9}, 50.0); },
                      x2);
}

TEST_CASE("gradcheck q and k through RoPE into the scores q kᵀ", "[gradcheck][positional][rope]") {
    // scores (T, T) = R(pos) q · (R(pos) k)ᵀ: both inputs' gradients pass through a rotation.
    Tensor q = leaf({4, 6}), k = leaf({4, 6});
    const IndexTensor positions{0, 1, 2, 3};
    REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
            return matmul(nn::apply_rotary(in[0], positions), nn::apply_rotary(in[1], positions).transpose(0, 1));
        },
        q, k);
}

TEST_CASE("gradcheck LearnedPositions", "[gradcheck][positional]") {
    nn::LearnedPositions wpe(8, 4);
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return wpe.forward(6).tanh(); }, wpe.weight);
}
