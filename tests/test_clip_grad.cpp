// tests/test_clip_grad.cpp — optim::clip_grad_norm_ over dense and row-sparse gradients together.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/optim_helpers.hpp.
#include "optim_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

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
