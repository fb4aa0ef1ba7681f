// tests/core/test_anomaly.cpp — anomaly mode, core/anomaly.cpp (float32): the first op whose
// forward output or backward gradient holds NaN or ±inf is named; an inf an input held and the op
// passed on (the -inf causal mask) is not flagged; a NaN the data held is blamed on the data.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// Anomaly mode refused every forward output holding ±inf, so the causal mask of attention,
// masked_fill(scores, triu(ones({T, T}), 1), -inf), threw on a normal run: first in masked_fill,
// then in softmax's x - max. A fill with ±inf is intended (x's entries that pass through are
// still checked), and an op that passes on an inf its input held did not produce it.
TEST_CASE("hostile: anomaly mode accepts the -inf causal mask of attention", "[hostile][regression]") {
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

TEST_CASE("anomaly mode names the first op whose forward output or backward gradient is not finite",
          "[reliability][anomaly][regression]") {
    SECTION("off: NaN flows silently") {
        Tensor x({-1, 2}, true);
        REQUIRE(std::isnan(log(x).data()(0)));
    }
    SECTION("forward") {
        DetectAnomalyGuard guard;
        Tensor x({-1, 2}, true);
        Tensor y = x * 2;  // finite: fine
        REQUIRE_THROWS_AS(log(y), ValueError);
        REQUIRE_THROWS_WITH(log(y), Contains("anomaly") && Contains("'log'") && Contains("NaN"));
    }
    SECTION("backward") {  // sqrt at 0 is finite; its derivative 0.5·0^-0.5 is not
        Tensor x({0, 4}, true);
        Tensor loss;
        {
            DetectAnomalyGuard guard;
            loss = pow(x, 0.5).sum();
        }
        REQUIRE_NOTHROW(loss.backward(Tensor(), true));  // the guard is gone
        x.reset_grad();
        DetectAnomalyGuard guard;
        REQUIRE_THAT(message_of<ValueError>([&] { loss.backward(); }), Contains("anomaly") && Contains("'pow'") && Contains("inf"));
    }
    SECTION("the guard restores the previous mode") {
        REQUIRE_FALSE(anomaly_enabled());
        {
            DetectAnomalyGuard on;
            REQUIRE(anomaly_enabled());
            {
                DetectAnomalyGuard off(false);
                REQUIRE_FALSE(anomaly_enabled());
            }
            REQUIRE(anomaly_enabled());
        }
        REQUIRE_FALSE(anomaly_enabled());
    }
}

TEST_CASE("anomaly mode blames the input that already held a NaN, not the op that received it",
          "[autograd][anomaly][regression]") {
    DetectAnomalyGuard guard;
    Tensor w = ones({2}, true);
    Tensor x({std::nanf(""), 1.0f});  // the data
    REQUIRE_THAT(message_of<ValueError>([&] { (w * x).sum(); }),
                 Contains("op 'mul' received NaN in its input 1") && Contains("flat index 0") && Contains("leaf"));
    // A NaN the op itself makes is still the op's: log(-1).
    REQUIRE_THAT(message_of<ValueError>([&] { log(w * -1); }), Contains("op 'log' produced NaN"));
}
