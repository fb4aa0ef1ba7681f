// tests/nn/gradcheck_loss.cpp — cross_entropy (mean/sum/none, ignore_index, label_smoothing,
// (B, T, C)), nll_loss, mse_loss and binary_cross_entropy_with_logits against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_loss && build/tests/gradcheck_loss`.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <type_traits>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== losses ===========================================================================================

TEST_CASE("gradcheck cross_entropy: reductions - ignore_index - label_smoothing", "[gradcheck][nn][loss]") {
    manual_seed(6);
    Tensor x = from_array(Array(3 * randn({5, 4}).data()), true);
    IndexTensor t{0, 3, 1, 1, 2};
    IndexTensor t_ign{0, -100, 1, -100, 2};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None}) {
        INFO("reduction " << static_cast<int>(r));
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t_ign, ce(r)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, -100, 0.2)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t_ign, ce(r, -100, 0.1)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, -100, 1.0)); }, x);
        // A custom ignore_index that is also a class ID.
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, 1)); }, x);
    }
}

TEST_CASE("gradcheck cross_entropy on (BxTxC) logits with (BxT) targets", "[gradcheck][nn][loss]") {
    manual_seed(7);
    Tensor x = leaf({2, 3, 5});
    IndexTensor t{{0, 4, 2}, {-100, 1, 1}};
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t); }, x);
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(nn::Reduction::None, -100, 0.1)); }, x);
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(nn::Reduction::Sum)); }, x);
}

TEST_CASE("gradcheck nll_loss", "[gradcheck][nn][loss]") {
    manual_seed(8);
    Tensor lp = leaf({4, 3});  // any values: nll_loss is linear in them
    IndexTensor t{2, 0, -100, 1};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([&](const auto& v) { return F::nll_loss(v[0], t, ce(r)); }, lp);
    // Composed with log_softmax: the unfused cross-entropy.
    REQUIRE_GRADCHECK([&](const auto& v) { return F::nll_loss(log_softmax(v[0], -1), t); }, lp);
}

TEST_CASE("gradcheck mse_loss - both operands", "[gradcheck][nn][loss]") {
    manual_seed(9);
    Tensor a = leaf({3, 4}), b = leaf({3, 4});
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([r](const auto& v) { return F::mse_loss(v[0], v[1], r); }, a, b);
}

TEST_CASE("gradcheck binary_cross_entropy_with_logits", "[gradcheck][nn][loss]") {
    manual_seed(10);
    Tensor x = from_array(Array(4 * randn({3, 4}).data()), true);
    Tensor y = rand({3, 4});  // soft targets in [0, 1)
    y.mutable_data()(0, 0) = 0;
    y.mutable_data()(0, 1) = 1;
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([&](const auto& v) { return F::binary_cross_entropy_with_logits(v[0], y, r); }, x);
}
