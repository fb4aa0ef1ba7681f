// tests/test_gradcheck_core.cpp — every core op's backward against finite differences.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Covers every op of core/ops.hpp, including
// broadcasting, repeated inputs f(x, x), transposed operands, batched and broadcast matmul,
// softmax/log_softmax, concat, max (inputs without ties), index_select with duplicate IDs, and
// small composites. The mutation tests prove the check can fail: ops whose backward is
// deliberately wrong must be rejected.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include <xtensor/xview.hpp>

#include "core/autograd.hpp"
#include "core/gradcheck.hpp"
#include "core/ops.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

namespace {

// A leaf with U[lo, lo + 1) values, for ops that need positive inputs (log, div, pow).
Tensor positive_leaf(const Shape& shape, real lo = 0.5) { return (rand(shape) + lo).detach().requires_grad_(); }

}  // namespace

// ==== elementwise, broadcasting ====================================================================

TEST_CASE("gradcheck add/sub/mul/div - same shapes", "[gradcheck][elementwise]") {
    manual_seed(1);
    Tensor a = leaf({2, 3}), b = leaf({2, 3}), c = positive_leaf({2, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return add(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return sub(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return mul(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return div(v[0], v[1]); }, a, c);
    REQUIRE_GRADCHECK([](const auto& v) { return neg(v[0]); }, a);
}

TEST_CASE("gradcheck broadcasting (2x3)⊕(3x) - (2x1)⊕(1x3) - (2x3)⊕() and (4x1x3)⊕(2x1)", "[gradcheck][elementwise][broadcast]") {
    manual_seed(2);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{2, 3}, {}}, {{4, 1, 3}, {2, 1}}, {{3}, {2, 3}}};
    for (const auto& [sa, sb] : cases) {
        INFO("shapes " << shape_str(sa) << " and " << shape_str(sb));
        Tensor a = leaf(sa), b = leaf(sb), pb = positive_leaf(sb);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] + v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] - v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] * v[1]; }, a, b);
        REQUIRE_GRADCHECK([](const auto& v) { return v[0] / v[1]; }, a, pb);
        REQUIRE_GRADCHECK([](const auto& v) { return v[1] / v[0]; }, positive_leaf(sa), b);
    }
}

TEST_CASE("gradcheck with one operand that does not require grad", "[gradcheck][elementwise]") {
    manual_seed(3);
    Tensor a = leaf({2, 3});
    Tensor constant = randn({3});
    REQUIRE_GRADCHECK([constant](const auto& v) { return v[0] * constant; }, a);
    REQUIRE_GRADCHECK([constant](const auto& v) { return constant / (v[0] * v[0] + 1); }, a);
}

TEST_CASE("gradcheck repeated inputs f(x x x)", "[gradcheck][repeated]") {
    manual_seed(4);
    Tensor x = leaf({3, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return mul(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return add(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return sub(v[0] * 3, v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return div(v[0], v[0] * v[0] + 1); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[0].transpose(0, 1)); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0] * 2, v[0]}, 1); }, x);
    // A diamond: h feeds three consumers.
    REQUIRE_GRADCHECK(
        [](const auto& v) {
            Tensor h = v[0].tanh();
            return h * h + h.exp() - sum(h, 0, true);
        },
        x);
}

TEST_CASE("gradcheck scalar variants", "[gradcheck][scalar]") {
    manual_seed(5);
    Tensor x = leaf({2, 3}), p = positive_leaf({2, 3});
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] + 2.5; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return 2.5 - v[0]; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] * -1.5; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0] / 4.0; }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return 3.0 / v[0]; }, p);
}

// ==== pointwise ======================================================================================

TEST_CASE("gradcheck pow - exp - log - tanh - sigmoid", "[gradcheck][pointwise]") {
    manual_seed(6);
    Tensor x = leaf({3, 4}), p = positive_leaf({3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 3); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], 2.5); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return pow(v[0], -1.5); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return exp(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return log(v[0]); }, p);
    REQUIRE_GRADCHECK([](const auto& v) { return tanh(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return sigmoid(v[0]); }, x);
    // Both branches of sigmoid's stable form, well away from 0.
    REQUIRE_GRADCHECK([](const auto& v) { return sigmoid(v[0]); }, Tensor({-8, -3, -0.5, 0.5, 3, 8}, true));
}

TEST_CASE("gradcheck relu away from its kink", "[gradcheck][pointwise]") {
    Tensor x({{-1.5, 0.3, 2}, {0.7, -0.2, -3}}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return relu(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return relu(v[0] * v[0] - 1); }, x);
}

// ==== reductions ======================================================================================

TEST_CASE("gradcheck sum and mean - all and along each dim", "[gradcheck][reduce]") {
    manual_seed(7);
    Tensor x = leaf({2, 3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return sum(v[0]); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return mean(v[0]); }, x);
    for (int d = -3; d < 3; ++d)
        for (bool keep : {false, true}) {
            INFO("dim " << d << " keepdim " << keep);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return sum(v[0], d, keep); }, x);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return mean(v[0], d, keep); }, x);
        }
}

TEST_CASE("gradcheck max - all and along each dim (no ties)", "[gradcheck][reduce]") {
    manual_seed(8);
    Tensor x = leaf({3, 4, 2});  // continuous values: ties have probability 0
    REQUIRE_GRADCHECK([](const auto& v) { return max(v[0]); }, x);
    for (int d = 0; d < 3; ++d)
        for (bool keep : {false, true}) {
            INFO("dim " << d << " keepdim " << keep);
            REQUIRE_GRADCHECK([d, keep](const auto& v) { return max(v[0], d, keep); }, x);
        }
    REQUIRE_GRADCHECK([](const auto& v) { return max(v[0] * v[0], -1); }, x);
}

// ==== shape =============================================================================================

TEST_CASE("gradcheck reshape - transpose - permute", "[gradcheck][shape]") {
    manual_seed(9);
    Tensor x = leaf({2, 3, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return reshape(v[0], {4, -1}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return v[0].view({-1}) * v[0].reshape({24}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return transpose(v[0], 0, 2); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return transpose(v[0], -1, 1); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return permute(v[0], {2, 0, 1}); }, x);
    REQUIRE_GRADCHECK([](const auto& v) { return permute(v[0], {1, 2, 0}) * permute(v[0], {1, 2, 0}).exp(); }, x);
}

TEST_CASE("gradcheck concat along each dim - with an input that needs no grad", "[gradcheck][shape]") {
    manual_seed(10);
    Tensor a = leaf({2, 3, 2}), b = leaf({2, 1, 2}), c = randn({2, 2, 2});
    REQUIRE_GRADCHECK([c](const auto& v) { return concat({v[0], c, v[1]}, 1); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0]}, 0); }, a);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0], v[0] * v[0]}, -1); }, a);
    REQUIRE_GRADCHECK([](const auto& v) { return concat({v[0]}, 2); }, a);
}

// ==== matmul ==============================================================================================

TEST_CASE("gradcheck matmul 2-D - including transposed operands", "[gradcheck][matmul]") {
    manual_seed(11);
    Tensor a = leaf({3, 4}), b = leaf({4, 2});
    Tensor at = leaf({4, 3}), bt = leaf({2, 4});
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, a, b);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(0, 1), v[1]); }, at, b);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1].transpose(0, 1)); }, a, bt);
    REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(0, 1), v[1].transpose(0, 1)); }, at, bt);
}

TEST_CASE("gradcheck matmul batched and broadcast", "[gradcheck][matmul]") {
    manual_seed(12);
    SECTION("(B,n,k) @ (B,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({3, 4, 2}));
    }
    SECTION("(B,n,k) @ (k,m): the right operand shared by every batch") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({4, 5}));
    }
    SECTION("(n,k) @ (B,k,m): the left operand shared by every batch") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({2, 4}), leaf({3, 4, 5}));
    }
    SECTION("(1,n,k) @ (B,k,m) and (B,n,k) @ (1,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({1, 2, 4}), leaf({3, 4, 2}));
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({3, 2, 4}), leaf({1, 4, 2}));
    }
    SECTION("4-D (2,1,n,k) @ (3,k,m) broadcasts to (2,3,n,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0], v[1]); }, leaf({2, 1, 2, 3}), leaf({3, 3, 2}));
    }
    SECTION("transposed batches: (B,k,n)ᵀ @ (B,k,m)") {
        REQUIRE_GRADCHECK([](const auto& v) { return matmul(v[0].transpose(1, 2), v[1]); }, leaf({2, 4, 3}),
                          leaf({2, 4, 2}));
    }
}

// ==== softmax family ========================================================================================

TEST_CASE("gradcheck softmax and log_softmax along each dim", "[gradcheck][softmax]") {
    manual_seed(13);
    Tensor x = leaf({2, 3, 4});
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax(v[0], d); }, x);
        REQUIRE_GRADCHECK([d](const auto& v) { return log_softmax(v[0], d); }, x);
    }
    // Large logits: the max subtraction keeps everything finite.
    Tensor big = (randn({2, 5}) * 3 + 1000).detach().requires_grad_();
    REQUIRE_GRADCHECK([](const auto& v) { return softmax(v[0], 1); }, big);
    REQUIRE_GRADCHECK([](const auto& v) { return log_softmax(v[0], 1); }, big);
}

TEST_CASE("gradcheck softmax_composed (the fused softmax's oracle) along each dim", "[gradcheck][softmax]") {
    manual_seed(15);
    Tensor x = leaf({2, 3, 11});  // rows of 11: two SIMD registers of 4 doubles and a tail
    for (int d = -3; d < 3; ++d) {
        INFO("dim " << d);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax(v[0], d); }, x);
        REQUIRE_GRADCHECK([d](const auto& v) { return softmax_composed(v[0], d); }, x);
    }
}

TEST_CASE("gradcheck softmax with a -inf mask", "[gradcheck][softmax]") {
    manual_seed(14);
    Tensor x = leaf({2, 4});
    const real inf = std::numeric_limits<real>::infinity();
    Tensor mask({{0, -inf, 0, 0}, {0, 0, -inf, -inf}});
    REQUIRE_GRADCHECK([mask](const auto& v) { return softmax(v[0] + mask, 1); }, x);
    // Only the unmasked log-probabilities, gathered by position: finite everywhere.
    REQUIRE_GRADCHECK(
        [mask](const auto& v) {
            return index_select(log_softmax(v[0] + mask, 1).reshape({-1}), 0, IndexTensor{0, 2, 3, 4, 5});
        },
        x);
}

// ==== indexing ===============================================================================================

TEST_CASE("gradcheck index_select with duplicate IDs - from a leaf and from a non-leaf", "[gradcheck][index]") {
    manual_seed(15);
    Tensor E = leaf({5, 3});
    const IndexTensor ids{{4, 0, 4}, {1, 4, 0}};
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0], 0, ids); }, E);       // leaf: direct scatter
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0] * 2, 0, ids); }, E);   // non-leaf
    REQUIRE_GRADCHECK([ids](const auto& v) { return index_select(v[0], 0, ids).tanh() + v[0].sum(); }, E);
    Tensor v1 = leaf({6});
    REQUIRE_GRADCHECK([](const auto& v) { return index_select(v[0], 0, IndexTensor{5, 5, 2}); }, v1);
}

TEST_CASE("gradcheck one_hot(ids) @ E - the embedding reference path", "[gradcheck][index]") {
    manual_seed(16);
    const IndexTensor ids{3, 3, 0, 1};
    REQUIRE_GRADCHECK([ids](const auto& v) { return matmul(one_hot(ids, 4), v[0]); }, leaf({4, 2}));
}

// ==== composites ===============================================================================================

TEST_CASE("gradcheck a two-layer MLP with a log_softmax NLL", "[gradcheck][composite]") {
    manual_seed(17);
    Tensor x = leaf({4, 3}), w1 = leaf({3, 5}), b1 = leaf({5}), w2 = leaf({5, 2}), b2 = leaf({2});
    const IndexTensor targets{0, 3, 5, 6};  // flat positions (row·2 + class) of each row's class
    REQUIRE_GRADCHECK(
        [targets](const auto& v) {
            Tensor h = tanh(matmul(v[0], v[1]) + v[2]);
            Tensor logp = log_softmax(matmul(h, v[3]) + v[4], 1);
            return -index_select(logp.reshape({-1}), 0, targets).mean();
        },
        x, w1, b1, w2, b2);
}

// ==== mutation tests: gradcheck must reject a wrong backward ======================================================

namespace {
// y = x³ with a chosen (possibly wrong) backward.
Tensor cube_with(const Tensor& x, std::function<Array(const Array& g, const Array& x)> bwd) {
    Array y = x.data() * x.data() * x.data();
    return make_result(std::move(y), "cube", {x}, [x = x.data(), bwd](const Array& g, const Array&) {
        return Grads{bwd(g, x)};
    });
}
}  // namespace

TEST_CASE("mutation: the correct cube backward passes - wrong ones fail", "[gradcheck][mutation]") {
    manual_seed(18);
    Tensor x = leaf({2, 3});
    const auto right = [](const Array& g, const Array& x) { return Array(3 * g * x * x); };
    const auto wrong_formula = [](const Array& g, const Array& x) { return Array(2 * g * x); };
    const auto lost_factor = [](const Array& g, const Array& x) { return Array(g * x * x); };
    const auto small_error = [](const Array& g, const Array& x) { return Array(3.01 * g * x * x); };

    REQUIRE_GRADCHECK([&](const auto& v) { return cube_with(v[0], right); }, x);
    using Backward = std::function<Array(const Array&, const Array&)>;
    for (const Backward& bad : {Backward(wrong_formula), Backward(lost_factor), Backward(small_error)}) {
        GradcheckResult r = gradcheck([&](const auto& v) { return cube_with(v[0], bad); }, {x});
        REQUIRE_FALSE(r.ok);
        REQUIRE_THAT(r.message, Contains("analytic") && Contains("numeric"));
        REQUIRE(r.max_abs_error > 0);
    }
}

TEST_CASE("mutation: a broadcast op that forgets to sum its gradient back fails", "[gradcheck][mutation]") {
    manual_seed(19);
    Tensor a = leaf({2, 3}), b = leaf({3});
    // y = a + b with b's gradient taken from row 0 only instead of summed over the rows.
    auto bad_add = [](const std::vector<Tensor>& v) {
        Array y = v[0].data() + v[1].data();
        return make_result(std::move(y), "bad_add", {v[0], v[1]}, [](const Array& g, const Array&) {
            Array gb = xt::view(g, 0, xt::all());
            return Grads{g, gb};
        });
    };
    GradcheckResult r = gradcheck(bad_add, {a, b});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Contains("input 1"));
}

TEST_CASE("mutation: a matmul backward with a transposed-operand mistake fails", "[gradcheck][mutation]") {
    manual_seed(20);
    Tensor a = leaf({3, 3}), b = leaf({3, 3});
    // dA should be G Bᵀ; this uses G B.
    auto bad_matmul = [](const std::vector<Tensor>& v) {
        Tensor y = matmul(v[0].detach(), v[1].detach());
        return make_result(y.data(), "bad_matmul", {v[0], v[1]},
                           [A = v[0].data(), B = v[1].data()](const Array& g, const Array&) {
                               Tensor G = from_array(g);
                               Array dA = matmul(G, from_array(B)).data();
                               Array dB = matmul(from_array(A).transpose(0, 1), G).data();
                               return Grads{dA, dB};
                           });
    };
    GradcheckResult r = gradcheck(bad_matmul, {a, b});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Contains("input 0"));
}

TEST_CASE("gradcheck refuses inputs that need no grad", "[gradcheck][errors]") {
    REQUIRE_THROWS_AS(gradcheck([](const auto& v) { return v[0] * 2; }, {Tensor({1, 2})}), ValueError);
    REQUIRE_THROWS_WITH(gradcheck([](const auto& v) { return v[0] * 2; }, {Tensor({1, 2})}),
                        Contains("gradcheck") && Contains("no input requires grad"));
}
