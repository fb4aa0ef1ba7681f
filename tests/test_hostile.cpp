// tests/test_hostile.cpp — findings of a fresh hostile pass over the attention-chapter ops
// (issue 10) and the reliability guards (issue 14), tried as a new user would.
//
// One TEST_CASE per finding, each written to fail before its fix. A finding is a crash, an
// exception that is not an xgrad error, or a silently wrong result.
//
// Legend: N rows, d width, T time.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "core/autograd.hpp"
#include "core/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::message_of;
using xgrad::testing::require_values;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

// masked_fill's backward read the mask through its handle, but the mask was not among the
// version-checked inputs: a mask changed in place between forward and backward (a padding mask
// buffer refilled for the next batch) silently gave the gradient of the new mask, dL/dx = (0, 0, 1)
// instead of (0, 1, 1). PyTorch saves the mask and refuses the backward.
TEST_CASE("hostile: masked_fill refuses a mask changed in place before the backward", "[hostile]") {
    Tensor x({1, 2, 3}, true);
    Tensor mask({1, 0, 0});
    Tensor y = masked_fill(x, mask, 0);
    mask.data()(1) = 1;  // the next batch's mask, written into the same buffer
    CHECK_THAT(message_of<ValueError>([&] { y.sum().backward(); }), Contains("masked_fill") && Contains("inplace"));

    // Replaced by an array of another shape: an xgrad error, not xt::broadcast_error.
    Tensor x2({1, 2, 3}, true);
    Tensor mask2({1, 0, 0});
    Tensor y2 = masked_fill(x2, mask2, 0);
    mask2.data() = Array(Shape{2}, real(1));
    CHECK_THAT(message_of<ValueError>([&] { y2.sum().backward(); }), Contains("masked_fill"));

    // Unchanged, the gradient is grad_out with 0 where the mask is set; the mask gets none.
    Tensor x3({1, 2, 3}, true);
    Tensor mask3({1, 0, 0}, true);
    masked_fill(x3, mask3, 0).sum().backward();
    require_values(x3.grad(), Tensor({0, 1, 1}));
    CHECK_FALSE(mask3.has_grad());
}

// LayerNorm's weight and bias are public members, as Linear's. Linear and Embedding refuse a
// forward after `weight` was reassigned (the optimizer and state_dict() hold the registered
// tensor); LayerNorm read the new tensor silently, so training stepped a tensor the forward no
// longer read, and save() wrote the stale one.
TEST_CASE("hostile: LayerNorm refuses a reassigned weight or bias", "[hostile]") {
    nn::LayerNorm ln(3);
    const Tensor x({{1, 2, 4}});
    ln.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { ln.forward(x); }), Contains("LayerNorm") && Contains("weight"));
    nn::LayerNorm ln2(3);
    ln2.bias = Tensor({1, 1, 1}, true);
    CHECK_THAT(message_of<ValueError>([&] { ln2.forward(x); }), Contains("LayerNorm") && Contains("bias"));
    // Without affine parameters there is nothing to reassign; a defined member is refused too.
    nn::LayerNorm plain(3, 1e-5, /*elementwise_affine=*/false);
    require_values(plain.forward(Tensor({{1, 1, 1}})), Tensor({{0, 0, 0}}));
    plain.weight = Tensor({2, 2, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { plain.forward(x); }), Contains("LayerNorm"));
    // Values changed in place are fine: the registered tensor is still the one read.
    nn::LayerNorm ln3(3);
    ln3.weight.data().fill(2);
    const Tensor y = ln3.forward(Tensor({{1, 2, 3}}));
    require_values(y, Tensor({{-2.4494714, 0, 2.4494714}}), 1e-5);
}

// Every backward assumed grad_out has its output's shape. An output whose array was replaced by a
// smaller one (through the public Tensor::data()) before a consumer recorded it passed the input
// checks, and gelu's, narrow's and dropout's backward then read past grad_out (a heap overflow
// under ASan). The engine now checks the output's shape before running its node's backward.
TEST_CASE("hostile: an output array replaced before the backward is an xgrad error", "[hostile]") {
    auto replaced_then_backward = [](auto op) {
        Tensor x = randn({4, 16}, true);
        Tensor y = op(x);
        y.data() = Array(Shape{1}, real(1));  // one element where the op wrote 4 x 16 (or 4 x 8)
        return message_of<ValueError>([&] { y.sum().backward(); });
    };
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return F::gelu(x); }), Contains("'gelu'") && Contains("replaced"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return narrow(x, 1, 0, 8); }), Contains("'narrow'"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return F::dropout(x, 0.5); }), Contains("'dropout'"));
    CHECK_THAT(replaced_then_backward([](const Tensor& x) { return nn::apply_rotary(x, IndexTensor::arange(4)); }),
               Contains("'apply_rotary'"));
    // The root itself replaced: its gradient has the new shape, the op expects the old one.
    Tensor x = randn({4, 16}, true);
    Tensor y = F::layer_norm(x, {16});
    y.data() = Array(Shape{1}, real(1));
    CHECK_THAT(message_of<ValueError>([&] { y.backward(); }), Contains("'layer_norm'"));
    // Reading an output through a non-const handle, or changing values in place, is still no error
    // (core/autograd.hpp: outputs are checked only as inputs of their consumers).
    Tensor a = Tensor({1, 2}, true);
    Tensor b = a * real(3);
    b.data()(0) = b.data()(0);
    b.sum().backward();
    require_values(a.grad(), Tensor({3, 3}));
}

// arange(end) counted ceil((end - start) / step) values in a double and cast it to size_t
// unchecked: arange(1e30) (a double past SIZE_MAX, undefined behaviour) silently gave an EMPTY
// tensor, and arange(4.6e18) asked malloc for 2^64 bytes (an ASan abort). Bounded before the cast.
TEST_CASE("hostile: float arange refuses a count past the element limit", "[hostile]") {
    CHECK_THAT(message_of<ValueError>([] { arange(real(1e30)); }), Contains("arange"));
    CHECK_THAT(message_of<ValueError>([] { arange(real(4.6e18)); }), Contains("arange"));
    CHECK_THAT(message_of<ValueError>([] { arange(0, 1, real(1e-30)); }), Contains("arange"));
    require_values(arange(real(3)), Tensor({0, 1, 2}));
    require_values(arange(1, 2, real(0.25)), Tensor({1, 1.25, 1.5, 1.75}));
    CHECK(arange(real(-3)).numel() == 0);  // an empty range, as before
}

// register_buffer turned requires_grad off on the caller's handle. Registering a tensor that is
// a parameter elsewhere (another module's weight, shared as a buffer) silently stopped that
// parameter's training: it kept its place in named_parameters() but never got a gradient.
TEST_CASE("hostile: register_buffer leaves a parameter given to it trainable", "[hostile]") {
    nn::Linear lin(2, 1, /*bias=*/false);
    struct Holder : nn::Module {} holder;
    const Tensor b = holder.register_buffer("w", lin.weight);
    CHECK(lin.weight.requires_grad());  // still a parameter of lin
    CHECK_FALSE(b.requires_grad());     // the buffer never requires grad
    require_values(b, lin.weight);      // holding the same values
    lin.forward(Tensor({{1, 2}})).sum().backward();
    REQUIRE(lin.weight.has_grad());
    require_values(lin.weight.grad(), Tensor({{1, 2}}));
    CHECK_FALSE(b.has_grad());
    // A tensor that does not require grad is stored as given (the same handle).
    const Tensor c = zeros({3});
    CHECK(holder.register_buffer("c", c).impl() == c.impl());
}

// Anomaly mode refused every forward output holding ±inf, so the causal mask of attention,
// masked_fill(scores, triu(ones({T, T}), 1), -inf), threw on a normal run: first in masked_fill,
// then in softmax's x - max. A fill with ±inf is intended (x's entries that pass through are
// still checked), and an op that passes on an inf its input held did not produce it.
TEST_CASE("hostile: anomaly mode accepts the -inf causal mask of attention", "[hostile]") {
    DetectAnomalyGuard anomaly;
    Tensor s({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, true);
    const real inf = std::numeric_limits<real>::infinity();
    Tensor w = softmax(masked_fill(s, triu(ones({3, 3}), 1), -inf), -1);  // (T, T) causal weights
    CHECK(w.data()(0, 0) == Approx(1));
    CHECK(w.data()(0, 1) == 0);
    (w * Tensor({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}})).sum().backward();
    REQUIRE(s.has_grad());
    // A NaN that x passes through is still an anomaly, whatever the fill.
    const real nan = std::numeric_limits<real>::quiet_NaN();
    Tensor bad({{1, nan}, {0, 0}});
    CHECK_THAT(message_of<ValueError>([&] { masked_fill(bad, Tensor({1, 0}), -inf); }), Contains("masked_fill") && Contains("NaN"));
    CHECK_THAT(message_of<ValueError>([&] { masked_fill(bad, Tensor({1, 0}), 0); }), Contains("masked_fill") && Contains("NaN"));
    // An op downstream that passes the -inf on did not produce it (softmax's x - max above);
    // an op that makes an inf from finite inputs still did, and a NaN is always an anomaly: a
    // row with every key masked gives -inf - (-inf) = NaN in softmax's x - max (inside the fused
    // softmax op, core/softmax.cpp, which anomaly mode names).
    Tensor shifted = masked_fill(s, triu(ones({3, 3}), 1), -inf) + real(1);
    CHECK(std::isinf(shifted.data()(0, 2)));
    CHECK_THAT(message_of<ValueError>([] { exp(Tensor({100})); }), Contains("'exp'") && Contains("inf"));
    CHECK_THAT(message_of<ValueError>([&] { softmax(masked_fill(s, ones({3, 3}), -inf), -1); }),
               Contains("'softmax'") && Contains("NaN"));
}
