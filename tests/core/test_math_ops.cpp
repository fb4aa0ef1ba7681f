// tests/core/test_math_ops.cpp — sqrt, rsqrt, var, abs, clamp, minimum and maximum of
// core/math_ops.cpp (float32): by hand and against PyTorch (tests/reference/core_ops_reference.hpp),
// unbiased and keepdim, the NaN of an unbiased variance over one element, the half/half gradient
// of a tie in minimum/maximum. Gradchecks: gradcheck_math_ops.cpp.
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

// ==== sqrt / rsqrt / var =============================================================================

TEST_CASE("sqrt and rsqrt - by hand and against PyTorch", "[math][torch]") {
    require_values(sqrt(Tensor({4, 9, 0.25})), Tensor({2, 3, 0.5}));
    require_values(Tensor({4, 0.25}).rsqrt(), Tensor({0.5, 2}));
    REQUIRE(rsqrt(Tensor({0})).item() == kInf);  // as PyTorch
    REQUIRE(std::isnan(sqrt(Tensor({-1})).item()));
    for (const std::string name : {"sqrt", "rsqrt"}) {
        INFO(name);
        Tensor x = torch_ref("root.x", true);
        Tensor y = name == "sqrt" ? x.sqrt() : x.rsqrt();
        require_values(y, torch_ref("root." + name + "_y"));
        (y * torch_ref("root.w")).sum().backward();
        require_values(x.grad(), torch_ref("root." + name + "_dx"));
    }
    // d√x/dx at 4 is 1/(2·2) = 0.25; d(1/√x)/dx at 4 is -1/2 · 4^(-3/2) = -1/16
    Tensor x({4.0}, true);
    sqrt(x).sum().backward();
    REQUIRE(x.grad().item() == Approx(0.25));
    x.reset_grad();
    rsqrt(x).sum().backward();
    REQUIRE(x.grad().item() == Approx(-0.0625));
}

TEST_CASE("var - by hand and against PyTorch with unbiased and keepdim", "[math][torch]") {
    // {1, 2, 3, 4}: mean 2.5, Σ(x - mean)² = 2.25 + 0.25 + 0.25 + 2.25 = 5: unbiased 5/3, biased 5/4
    Tensor r({{1, 2, 3, 4}}, true);
    REQUIRE(var(r, 1).item() == Approx(5.0 / 3));
    REQUIRE(r.var(1, false, false).item() == Approx(1.25));
    REQUIRE(var(r, 1, true).shape() == Shape{1, 1});
    // dL/dx = 2 (x - mean) / 3 = {-1, -1/3, 1/3, 1}
    var(r, -1).sum().backward();
    require_values(r.grad(), Tensor({{-1, -1.0 / 3, 1.0 / 3, 1}}));

    Tensor x = torch_ref("var.x", true);  // (3, 4) with mean about 100: the two-pass sum keeps precision
    for (bool unbiased : {true, false}) {
        const std::string tag = unbiased ? "unbiased" : "biased";
        INFO(tag);
        x.reset_grad();
        Tensor y1 = var(x, 1, false, unbiased);
        require_values(y1, torch_ref("var.y1_" + tag));
        (y1 * torch_ref("var.w1")).sum().backward();
        require_values(x.grad(), torch_ref("var.dx1_" + tag));
        x.reset_grad();
        Tensor y0 = var(x, 0, true, unbiased);
        require_values(y0, torch_ref("var.y0_" + tag));
        (y0 * torch_ref("var.w0")).sum().backward();
        require_values(x.grad(), torch_ref("var.dx0_" + tag));
    }
}

TEST_CASE("var - one element gives NaN when unbiased as in PyTorch 1.13", "[math]") {
    Tensor x({{3.0}}, true);
    Tensor y = var(x, 1);  // divisor N - 1 = 0: 0/0
    REQUIRE(std::isnan(y.item()));
    y.sum().backward();
    REQUIRE(std::isnan(x.grad().item()));  // torch 1.13 gives NaN too
    REQUIRE(var(x, 1, false, false).item() == 0);  // biased: 0/1
    REQUIRE(std::isnan(var(zeros({2, 0}), 1).data()(0)));  // an empty dim: NaN, as PyTorch
    REQUIRE_THROWS_AS(var(x, 2), ValueError);
    REQUIRE_THROWS_AS(var(Tensor(1.0), 0), ValueError);
}

// ==== abs / clamp / minimum / maximum ================================================================

TEST_CASE("abs and clamp - by hand and against PyTorch", "[math][torch]") {
    Tensor x({-2, 0, 3, kNaN}, true);
    Tensor a = abs(x);
    require_values(narrow(a, 0, 0, 3), {2, 0, 3});
    REQUIRE(std::isnan(a.data()(3)));
    a.sum().backward();
    require_values(x.grad(), {-1, 0, 1, 0});  // sign(x); 0 at 0 and at NaN, as PyTorch

    Tensor c({-2, -1, 0, 0.5, 1, 3}, true);
    Tensor y = clamp(c, -1.0, 0.5);
    require_values(y, {-1, -1, 0, 0.5, 0.5, 0.5});
    y.sum().backward();
    require_values(c.grad(), {0, 1, 1, 1, 0, 0});  // g passes where min <= x <= max, bounds included
    require_values(clamp(c, 1.0, -1.0), {-1, -1, -1, -1, -1, -1});  // min > max: max everywhere
    require_values(clamp_min(c, 0.5), {0.5, 0.5, 0.5, 0.5, 1, 3});
    require_values(clamp_max(c, 0.0), {-2, -1, 0, 0, 0, 0});
    REQUIRE(std::isnan(clamp(Tensor({kNaN}), 0.0, 1.0).item()));
    REQUIRE_THROWS_WITH(clamp(c, std::nullopt, std::nullopt), Contains("clamp: at least one of min and max must be given"));
    // A NaN bound was ignored (every x passed through); PyTorch turns the whole result into NaN.
    REQUIRE_THROWS_WITH(clamp(c, kNaN, 1.0), Contains("clamp: min is nan; a bound must not be NaN"));
    REQUIRE_THROWS_WITH(clamp_max(c, kNaN), Contains("clamp: max is nan; a bound must not be NaN"));

    Tensor xr = torch_ref("piecewise.x", true);
    for (const std::string name : {"abs", "clamp", "clamp_min", "clamp_max"}) {
        INFO(name);
        xr.reset_grad();
        Tensor yr = name == "abs" ? abs(xr) : name == "clamp" ? clamp(xr, -1.0, 0.5)
                  : name == "clamp_min" ? clamp_min(xr, -1.0) : clamp_max(xr, 0.5);
        require_values(yr, torch_ref("piecewise." + name + "_y"));
        weighted_sum(yr, torch_ref("piecewise.w")).backward();
        require_values(xr.grad(), torch_ref("piecewise." + name + "_dx"));
    }
}

TEST_CASE("minimum and maximum - broadcast against PyTorch", "[math][torch]") {
    Tensor x = torch_ref("piecewise.x", true), b = torch_ref("piecewise.b", true);  // (3, 4) and (4,)
    for (const std::string name : {"maximum", "minimum"}) {
        INFO(name);
        x.reset_grad();
        b.reset_grad();
        Tensor y = name == "maximum" ? maximum(x, b) : minimum(x, b);
        require_values(y, torch_ref("piecewise." + name + "_y"));
        weighted_sum(y, torch_ref("piecewise.w")).backward();
        require_values(x.grad(), torch_ref("piecewise." + name + "_dx"));
        require_values(b.grad(), torch_ref("piecewise." + name + "_db"));
    }
}

TEST_CASE("minimum and maximum - a tie splits the gradient half and half, NaN propagates", "[math]") {
    // a tie is not differentiable, so it is checked by value: PyTorch gives grad / 2 to each side
    for (bool is_max : {true, false}) {
        INFO((is_max ? "maximum" : "minimum"));
        Tensor a({1, 2, 5, kNaN}, true), b({1, 3, 4, 0}, true);
        Tensor y = is_max ? maximum(a, b) : minimum(a, b);
        require_values(narrow(y, 0, 0, 3), is_max ? Tensor({1, 3, 5}) : Tensor({1, 2, 4}));
        REQUIRE(std::isnan(y.data()(3)));
        y.backward(Tensor({10, 10, 10, 10}));
        // tie: 5 and 5; 2 vs 3 and 5 vs 4: all to the winner; NaN: no comparison holds, g to both
        require_values(a.grad(), is_max ? Tensor({5, 0, 10, 10}) : Tensor({5, 10, 0, 10}));
        require_values(b.grad(), is_max ? Tensor({5, 10, 0, 10}) : Tensor({5, 0, 10, 10}));
    }
    Tensor s({2.0}, true), v({2, 1, 2}, true);  // a broadcast tie: s meets two equal values
    maximum(s, v).sum().backward();
    require_values(s.grad(), {2});  // 1/2 (tie) + 1 (2 > 1) + 1/2 (tie)
    require_values(v.grad(), {0.5, 0, 0.5});
    REQUIRE(std::isnan(minimum(Tensor({1}), Tensor({kNaN})).item()));
    REQUIRE_THROWS_WITH(maximum(zeros({2}), zeros({3})), Contains("maximum: shapes (2) and (3) cannot be broadcast"));
    REQUIRE_THROWS_WITH(minimum(zeros({2, 2}), zeros({3})), Contains("minimum: shapes (2, 2) and (3) cannot be broadcast"));
}
