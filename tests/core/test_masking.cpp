// tests/core/test_masking.cpp — masked_fill, tril and triu of core/masking.cpp (float32):
// by hand, against PyTorch (tests/reference/core_ops_reference.hpp), a mask that does not
// broadcast, and a mask changed in place before the backward. Gradchecks: gradcheck_masking.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <xgrad/core/ops.hpp>
#include "reference/core_ops_reference.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

namespace {

// Exact comparison that treats -inf == -inf as equal (require_values' Approx would not).
void require_same_with_inf(const Tensor& t, const Tensor& expected) {
    REQUIRE(t.shape() == expected.shape());
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        const real a = t.data().data()[i], b = expected.data().data()[i];
        INFO("flat element " << i);
        if (std::isinf(b)) REQUIRE(a == b);
        else REQUIRE(a == Approx(b).epsilon(1e-5).margin(1e-5));
    }
}

}  // namespace

// ==== masked_fill / tril / triu ========================================================================

TEST_CASE("masked_fill - by hand with a broadcast row mask", "[masking]") {
    Tensor x({{1, 2, 3}, {4, 5, 6}}, true);
    Tensor mask({0, 1, 0});  // (3,) broadcasts over the 2 rows
    Tensor y = masked_fill(x, mask, -kInf);
    REQUIRE(y.shape() == Shape{2, 3});
    REQUIRE(y.at({0, 0}) == 1);
    REQUIRE(y.at({0, 1}) == -kInf);
    REQUIRE(y.at({1, 1}) == -kInf);
    REQUIRE(y.at({1, 2}) == 6);
    // dL/dx = 0 at the filled entries, and the mask gets nothing (it is not an input of the graph).
    masked_fill(x, mask, 0.0).sum().backward();
    require_values(x.grad(), Tensor({{1, 0, 1}, {1, 0, 1}}));
    REQUIRE(x.masked_fill(mask, 9).at({1, 1}) == 9);
}

TEST_CASE("masked_fill - values and gradients match PyTorch", "[masking][torch]") {
    Tensor x = torch_ref("masked_fill.x", true), w = torch_ref("masked_fill.w");
    for (const std::string tag : {"a", "b"}) {
        INFO("mask " << tag);
        Tensor mask = torch_ref("masked_fill.mask_" + tag);
        const real value = tag == "a" ? -kInf : 7.5;
        x.reset_grad();
        Tensor y = masked_fill(x, mask, value);
        require_same_with_inf(y, torch_ref("masked_fill.y_" + tag));
        (masked_fill(y, mask, 0.0) * w).sum().backward();
        require_values(x.grad(), torch_ref("masked_fill.dx_" + tag));
    }
    // The attention pattern: softmax over -inf-masked scores gives the future weight exactly 0.
    x.reset_grad();
    Tensor p = softmax(masked_fill(x, torch_ref("masked_fill.mask_a"), -kInf), -1);
    require_values(p, torch_ref("masked_fill.softmax_a"));
    REQUIRE(p.at({0, 0, 3}) == 0);
    (p * w).sum().backward();
    require_values(x.grad(), torch_ref("masked_fill.softmax_dx_a"));
}

TEST_CASE("masked_fill - a mask that does not broadcast to x throws", "[masking][errors]") {
    Tensor x = zeros({2, 3});
    REQUIRE_THROWS_AS(masked_fill(x, zeros({2}), 1), ValueError);
    REQUIRE_THROWS_WITH(masked_fill(x, zeros({2}), 1),
                        Contains("masked_fill") && Contains("(2)") && Contains("(2, 3)"));
    REQUIRE_THROWS_AS(masked_fill(x, zeros({4, 2, 3}), 1), ValueError);  // larger than x
    REQUIRE_THROWS_AS(masked_fill(x, zeros({3, 3}), 1), ValueError);
    REQUIRE_THROWS_AS(masked_fill(x, Tensor(), 1), ValueError);
}

TEST_CASE("tril and triu - by hand and against PyTorch with offsets", "[masking][torch]") {
    Tensor m({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
    require_values(tril(m), Tensor({{1, 0, 0}, {4, 5, 0}, {7, 8, 9}}));
    require_values(triu(m, 1), Tensor({{0, 2, 3}, {0, 0, 6}, {0, 0, 0}}));
    require_values(m.tril(-1), Tensor({{0, 0, 0}, {4, 0, 0}, {7, 8, 0}}));
    // The causal mask: 1 above the diagonal (the future), 0 on and below it.
    require_values(triu(ones({3, 3}), 1), Tensor({{0, 1, 1}, {0, 0, 1}, {0, 0, 0}}));
    Tensor x = torch_ref("tri.x");  // (2, 3, 4): batch dims are carried along
    for (std::int64_t k : {-1, 0, 2}) {
        INFO("k = " << k);
        require_values(tril(x, k), torch_ref("tri.tril_" + std::to_string(k)));
        require_values(triu(x, k), torch_ref("tri.triu_" + std::to_string(k)));
    }
    require_values(tril(x, -5), zeros({2, 3, 4}));  // offsets past the matrix are fine
    require_values(triu(x, -5), x);
    // Differentiable: the gradient is the kept pattern.
    Tensor leaf_m = ones({2, 2}, true);
    triu(leaf_m).sum().backward();
    require_values(leaf_m.grad(), Tensor({{1, 1}, {0, 1}}));
    REQUIRE_THROWS_AS(tril(zeros({3})), ValueError);
    REQUIRE_THROWS_WITH(triu(zeros({3})), Contains("triu") && Contains("at least 2 dims") && Contains("(3)"));
}

// masked_fill's backward read the mask through its handle, but the mask was not among the
// version-checked inputs: a mask changed in place between forward and backward (a padding mask
// buffer refilled for the next batch) silently gave the gradient of the new mask, dL/dx = (0, 0, 1)
// instead of (0, 1, 1). PyTorch saves the mask and refuses the backward.
TEST_CASE("hostile: masked_fill refuses a mask changed in place before the backward", "[hostile][regression]") {
    Tensor x({1, 2, 3}, true);
    Tensor mask({1, 0, 0});
    Tensor y = masked_fill(x, mask, 0);
    mask.mutable_data()(1) = 1;  // the next batch's mask, written into the same buffer
    CHECK_THAT(message_of<ValueError>([&] { y.sum().backward(); }), Contains("masked_fill") && Contains("inplace"));

    // Replaced by an array of another shape: an xgrad error, not xt::broadcast_error.
    Tensor x2({1, 2, 3}, true);
    Tensor mask2({1, 0, 0});
    Tensor y2 = masked_fill(x2, mask2, 0);
    mask2.mutable_data() = Array(ArrayShape{2}, real(1));
    CHECK_THAT(message_of<ValueError>([&] { y2.sum().backward(); }), Contains("masked_fill"));

    // Unchanged, the gradient is grad_out with 0 where the mask is set; the mask gets none.
    Tensor x3({1, 2, 3}, true);
    Tensor mask3({1, 0, 0}, true);
    masked_fill(x3, mask3, 0).sum().backward();
    require_values(x3.grad(), Tensor({0, 1, 1}));
    CHECK_FALSE(mask3.has_grad());
}
