// tests/core/test_math_ops.cpp — sqrt, rsqrt and var of core/math_ops.cpp (float32): by hand and
// against PyTorch (tests/reference/core_ops_reference.hpp), unbiased and keepdim, and the NaN of
// an unbiased variance over one element. Gradchecks: gradcheck_math_ops.cpp.
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
