// tests/optim/test_clip_grad.cpp — optim::clip_grad_norm_ over dense and row-sparse gradients
// together, and error_if_nonfinite with NaN and inf norms (as torch.nn.utils.clip_grad_norm_).
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient.
#include <catch2/catch.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// ---- clip_grad_norm_ ----------------------------------------------------------------------------------

TEST_CASE("clip_grad_norm_ measures dense and sparse gradients together", "[optim][clip]") {
    Tensor a = from_array(xt::zeros<real>({2, 2}), true);
    Tensor e = from_array(xt::zeros<real>({6, 2}), true);
    Tensor none = from_array(xt::zeros<real>({3}), true);  // no gradient: skipped
    auto reset = [&] {
        a.set_grad(Tensor({{3.0f, 0.0f}, {0.0f, 4.0f}}));
        Array row = xt::zeros<real>({1, 2});
        row(0, 1) = 12.0f;
        set_sparse_grad(e, {5}, row);
    };
    const NamedTensors params{{"a", a}, {"e", e}, {"none", none}};

    reset();  // ‖G‖₂ = √(9 + 16 + 144) = 13
    double norm = optim::clip_grad_norm_(params, 1.3);
    REQUIRE(norm == Approx(13.0));
    const double coef = 1.3 / (13.0 + 1e-6);
    REQUIRE(a.grad().data()(0, 0) == Approx(3 * coef));
    REQUIRE(a.grad().data()(1, 1) == Approx(4 * coef));
    REQUIRE(e.sparse_grad()->values(0, 1) == Approx(12 * coef));
    REQUIRE(optim::clip_grad_norm_(params, 100.0) == Approx(1.3).epsilon(1e-6));

    reset();  // below max_norm: unchanged, bit for bit
    REQUIRE(optim::clip_grad_norm_(params, 20.0) == Approx(13.0));
    REQUIRE(a.grad().data()(1, 1) == 4.0f);

    reset();  // ‖G‖∞ = 12, ‖G‖₁ = 19
    REQUIRE(optim::clip_grad_norm_(params, 100.0, std::numeric_limits<double>::infinity()) == Approx(12.0));
    REQUIRE(optim::clip_grad_norm_(params, 100.0, 1.0) == Approx(19.0));
    require_value_error([&] { optim::clip_grad_norm_(params, -1.0); }, "max_norm");
    require_value_error([&] { optim::clip_grad_norm_(params, 1.0, 0.0); }, "norm_type");
}

// =============================================================================================
// clip_grad_norm_(error_if_nonfinite)
// =============================================================================================

// Reference: torch.nn.utils.clip_grad_norm_ in torch 1.13 (Debian python3-torch), run by hand:
//   a.grad = [1, 2, nan], b.grad = [3, 4], max_norm 1  -> norm nan, a.grad [nan, nan, nan], b.grad [nan, nan]
//   a.grad = [1, 2, inf], b.grad = [3, 4], max_norm 1  -> norm inf, a.grad [0, 0, nan],     b.grad [0, 0]
//   error_if_nonfinite=True on either                  -> RuntimeError, gradients unchanged
TEST_CASE("ckpt clip_grad_norm_: error_if_nonfinite throws on a NaN or inf norm - otherwise scales as PyTorch",
          "[ckpt][optim][clip][regression]") {
    const real nan = std::numeric_limits<real>::quiet_NaN(), inf = std::numeric_limits<real>::infinity();
    Tensor a = zeros({3}, true), b = zeros({2}, true);
    const std::vector<Tensor> params{a, b};
    for (real bad : {nan, inf, -inf}) {
        INFO("bad gradient entry " << bad);
        a.set_grad(Tensor({1, 2, bad}));
        b.set_grad(Tensor({3, 4}));
        const Array a_before = a.grad().data(), b_before = b.grad().data();
        CHECK_THAT(message_of<ValueError>([&] { optim::clip_grad_norm_(params, 1.0, 2.0, true); }),
                   Contains("clip_grad_norm_") && Contains("error_if_nonfinite"));
        REQUIRE(bits_equal(a.grad().data(), a_before));
        REQUIRE(bits_equal(b.grad().data(), b_before));
        CHECK_THROWS_AS(optim::clip_grad_norm_(params, 1.0, std::numeric_limits<double>::infinity(), true),
                        ValueError);

        const double norm = optim::clip_grad_norm_(params, 1.0);  // error_if_nonfinite = false
        const Array& ga = a.grad().data();
        const Array& gb = b.grad().data();
        if (std::isnan(bad)) {
            REQUIRE(std::isnan(norm));
            for (real v : ga) REQUIRE(std::isnan(v));
            for (real v : gb) REQUIRE(std::isnan(v));
        } else {
            REQUIRE(norm == std::numeric_limits<double>::infinity());
            REQUIRE(ga(0) == 0);
            REQUIRE(ga(1) == 0);
            REQUIRE(std::isnan(ga(2)));
            REQUIRE(gb(0) == 0);
            REQUIRE(gb(1) == 0);
        }
    }
    // A finite norm is unaffected by the flag.
    a.set_grad(Tensor({3, 0, 0}));
    b.set_grad(Tensor({0, 4}));
    REQUIRE(optim::clip_grad_norm_(params, 1.0, 2.0, true) == Approx(5.0));
    REQUIRE(a.grad().data()(0) == Approx(3.0 / (5.0 + 1e-6)));
}
