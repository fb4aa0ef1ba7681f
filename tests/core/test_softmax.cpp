// tests/core/test_softmax.cpp — core/softmax.cpp (float32): softmax and log_softmax on logits of
// 1e4 and with -inf entries (zero probability, exactly zero gradient), along dim 0, and the fused
// softmax against its oracle softmax_composed. Gradchecks: gradcheck_softmax.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmanipulation.hpp>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/detail/permute.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// ==== softmax family ========================================================================================

TEST_CASE("softmax and log_softmax are finite for logits of 1e4", "[ops][softmax]") {
    Tensor x({{10000, 9999, 9998}, {-10000, 0, 10000}}, true);
    Tensor s = x.softmax(1);
    Tensor ls = x.log_softmax(1);
    REQUIRE(all_finite(s));
    REQUIRE(all_finite(ls));
    // softmax([0, -1, -2]) = e^-i / (1 + e^-1 + e^-2)
    require_values(s, {{0.66524096, 0.24472847, 0.09003057}, {0, 0, 1}});
    require_values(ls, {{-0.40760596, -1.40760596, -2.40760596}, {-20000, -10000, 0}}, 1e-4);
    require_values(s.sum(1), {1, 1});

    (s * Tensor({{1, 2, 3}, {1, 2, 3}})).sum().backward();
    REQUIRE(all_finite(x.grad()));
    // dL/dx_i = s_i (w_i - Σ_j s_j w_j)
    const real p0 = 0.66524096f, p1 = 0.24472847f, p2 = 0.09003057f, sw = p0 + 2 * p1 + 3 * p2;
    require_values(x.grad(), {{p0 * (1 - sw), p1 * (2 - sw), p2 * (3 - sw)}, {0, 0, 0}});
    x.reset_grad();
    ls.sum().backward();
    REQUIRE(all_finite(x.grad()));
}

TEST_CASE("softmax with -inf entries: zero probability and exactly zero gradient there", "[ops][softmax]") {
    Tensor x({{0, -kInf, 0}, {1, 2, -kInf}}, true);
    Tensor s = x.softmax(-1);
    REQUIRE(all_finite(s));
    require_values(s, {{0.5, 0, 0.5}, {0.26894142, 0.73105858, 0}});
    REQUIRE(s.at({0, 1}) == 0.0f);
    REQUIRE(s.at({1, 2}) == 0.0f);

    (s * Tensor({{1, 2, 3}, {1, 2, 3}})).sum().backward();
    REQUIRE(all_finite(x.grad()));
    REQUIRE(x.grad().at({0, 1}) == 0.0f);
    REQUIRE(x.grad().at({1, 2}) == 0.0f);
    // Row 0: Σ s w = 2;  row 1: Σ s w = 0.26894142 + 2·0.73105858 = 1.73105858.
    const real s1 = 0.26894142f, s2 = 0.73105858f, sw = s1 + 2 * s2;
    require_values(x.grad(), {{-0.5, 0, 0.5}, {s1 * (1 - sw), s2 * (2 - sw), 0}});
}

TEST_CASE("log_softmax with -inf entries: NLL gradient is softmax - onehot - exactly zero at -inf", "[ops][softmax]") {
    Tensor x({{0, -kInf, 0}, {1, 2, -kInf}}, true);
    Tensor ls = x.log_softmax(1);
    REQUIRE(ls.at({0, 1}) == -kInf);
    REQUIRE(ls.at({0, 0}) == Approx(std::log(0.5)));
    REQUIRE(ls.at({1, 1}) == Approx(std::log(0.73105858)));
    // NLL of targets (0, 1): pick entries 0 and 4 of the flattened (2, 3) log-probabilities.
    Tensor picked = index_select(ls.reshape({-1}), 0, IndexTensor{0, 4});
    Tensor nll = -picked.sum();
    REQUIRE(std::isfinite(nll.item()));
    nll.backward();
    REQUIRE(all_finite(x.grad()));
    REQUIRE(x.grad().at({0, 1}) == 0.0f);
    REQUIRE(x.grad().at({1, 2}) == 0.0f);
    require_values(x.grad(), {{0.5 - 1, 0, 0.5}, {0.26894142, 0.73105858 - 1, 0}});
}

TEST_CASE("softmax along dim 0 normalises columns", "[ops][softmax]") {
    Tensor x({{0, 1}, {0, 3}});
    Tensor s = x.softmax(0);
    require_values(s, {{0.5, 0.11920292}, {0.5, 0.88079708}});
    require_values(s.sum(0), {1, 1});
}

// The fused softmax (core/softmax.cpp) against its oracle, softmax_composed, along every dim of a
// 3-D tensor, on rows longer than one SIMD register (37: 4 full registers of 8 and a tail of 5),
// with -inf entries: the values and the gradients for a G whose entries all differ.
TEST_CASE("fused softmax equals softmax_composed - values and gradients along each dim", "[ops][softmax]") {
    manual_seed(21);
    Tensor base = randn({3, 37, 5}) * 4;
    base.mutable_data().data()[7] = -kInf;  // masked entries, as attention's causal mask makes them
    base.mutable_data().data()[200] = -kInf;
    const Tensor G = randn({3, 37, 5});
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        Tensor xf = base.detach().requires_grad_(), xc = base.detach().requires_grad_();
        Tensor yf = softmax(xf, d), yc = softmax_composed(xc, d);
        require_values(yf, yc, 1e-6);
        yf.backward(G);
        yc.backward(G);
        require_values(xf.grad(), xc.grad(), 1e-5);
        REQUIRE(xf.grad().data().data()[7] == 0.0f);
        REQUIRE(yf.data().data()[200] == 0.0f);
    }
}
