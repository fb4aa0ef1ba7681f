// tests/core/test_masked_matmul.cpp — masked_matmul and sampled_matmul (core/masked_matmul.cpp):
// hand-computed values and gradients, a non-finite operand in a hidden pair that stays out of the
// output and every gradient, agreement with matmul where nothing is hidden, and bad shapes.
// Shapes: a (..., M, K), b (..., K, N); keep (..., M, K) for masked_matmul, (..., M, N) for sampled.
#include <catch2/catch.hpp>

#include <cmath>

#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

TEST_CASE("masked_matmul: hand values, and a hidden entry of a is never read", "[masked_matmul]") {
    // keep = [[1, 0], [1, 1]]: y[0] = 1·b[0] = [5, 6]; y[1] = 3·b[0] + 4·b[1] = [43, 50]
    // a[0][1] = 100 is hidden, so it changes nothing.
    Tensor a = Tensor({{1, 100}, {3, 4}}, true), b = Tensor({{5, 6}, {7, 8}}, true);
    const Tensor keep({{1, 0}, {1, 1}});
    Tensor y = masked_matmul(a, b, keep);
    require_values(y, Tensor({{5, 6}, {43, 50}}), 0);
    sum(y).backward();
    // da[m, k] = keep ? Σ_n b[k, n] : 0 = [[11, 0], [11, 15]]; db[k, n] = Σ_{m kept} a[m, k] = [[4, 4], [4, 4]]
    require_values(a.grad(), Tensor({{11, 0}, {11, 15}}), 0);
    require_values(b.grad(), Tensor({{4, 4}, {4, 4}}), 0);
}

TEST_CASE("masked_matmul: a NaN row of b reaches only the rows that keep it", "[masked_matmul][regression]") {
    Tensor a = Tensor({{1, 0}, {3, 4}}, true), b = Tensor({{5, 6}, {kNaN, 8}}, true);
    Tensor y = masked_matmul(a, b, Tensor({{1, 0}, {1, 1}}));
    require_values(narrow(y, 0, 0, 1), Tensor({{5, 6}}), 0);  // row 0 hides b[1]: 0 · NaN is not formed
    REQUIRE(std::isnan(y.at({1, 0})));
    sum(y).backward();
    require_values(narrow(a.grad(), 0, 0, 1), Tensor({{11, 0}}), 0);  // da[0] = [Σ b[0], hidden]
    REQUIRE(std::isnan(a.grad().at({1, 1})));                        // da[1][1] = Σ b[1] = NaN: kept
    require_values(b.grad(), Tensor({{4, 4}, {4, 4}}), 0);           // db reads a and g only
}

TEST_CASE("sampled_matmul: hand values, and a hidden product is never formed", "[masked_matmul][regression]") {
    // a · b = [[19, 22], [43, 50]]; keep = [[1, 0], [0, 1]] gives [[19, 0], [0, 50]].
    Tensor a = Tensor({{1, 2}, {3, 4}}, true), b = Tensor({{5, 6}, {7, 8}}, true);
    const Tensor keep({{1, 0}, {0, 1}});
    Tensor y = sampled_matmul(a, b, keep);
    require_values(y, Tensor({{19, 0}, {0, 50}}), 0);
    sum(y).backward();
    // da[m, k] = Σ_{n kept} b[k, n]: da[0] = b[:, 0] = [5, 7], da[1] = b[:, 1] = [6, 8]
    // db[k, n] = Σ_{m kept} a[m, k]: db[:, 0] = a[0] = [1, 2], db[:, 1] = a[1] = [3, 4]
    require_values(a.grad(), Tensor({{5, 7}, {6, 8}}), 0);
    require_values(b.grad(), Tensor({{1, 3}, {2, 4}}), 0);
    // A NaN in column 1 of b is hidden from row 0: y[0] and da[0] stay finite.
    Tensor a2 = Tensor({{1, 2}, {3, 4}}, true), b2 = Tensor({{5, kNaN}, {7, 8}}, true);
    Tensor y2 = sampled_matmul(a2, b2, keep);
    REQUIRE(y2.at({0, 0}) == 19);
    REQUIRE(y2.at({0, 1}) == 0);
    REQUIRE(std::isnan(y2.at({1, 1})));
    sum(y2).backward();
    require_values(narrow(a2.grad(), 0, 0, 1), Tensor({{5, 7}}), 0);
    REQUIRE(std::isnan(a2.grad().at({1, 0})));  // row 1 keeps column 1, so it sees the NaN
    require_values(b2.grad(), Tensor({{1, 3}, {2, 4}}), 0);
}

TEST_CASE("masked_matmul and sampled_matmul equal matmul on finite inputs, batched with a broadcast keep",
          "[masked_matmul]") {
    manual_seed(3);
    const Tensor a0 = randn({2, 3, 4, 5}), b0 = randn({2, 3, 5, 6}), G = randn({2, 3, 4, 6});
    const Tensor keep_mk = tril(ones({4, 5})), keep_mn = tril(ones({4, 6}));  // broadcast over (2, 3)
    Tensor a = a0.detach().requires_grad_(), b = b0.detach().requires_grad_();
    Tensor ar = a0.detach().requires_grad_(), br = b0.detach().requires_grad_();
    Tensor y = masked_matmul(a, b, keep_mk), yr = matmul(ar * keep_mk, br);
    require_values(y, yr, 1e-5);
    sum(y * G).backward();
    sum(yr * G).backward();
    require_values(a.grad(), ar.grad(), 1e-5);
    require_values(b.grad(), br.grad(), 1e-5);
    Tensor a2 = a0.detach().requires_grad_(), b2 = b0.detach().requires_grad_();
    Tensor a2r = a0.detach().requires_grad_(), b2r = b0.detach().requires_grad_();
    Tensor s = sampled_matmul(a2, b2, keep_mn), sr = matmul(a2r, b2r) * keep_mn;
    require_values(s, sr, 1e-5);
    sum(s * G).backward();
    sum(sr * G).backward();
    require_values(a2.grad(), a2r.grad(), 1e-5);
    require_values(b2.grad(), b2r.grad(), 1e-5);
}

TEST_CASE("masked_matmul and sampled_matmul: bad shapes throw ValueError", "[masked_matmul]") {
    const Tensor a = zeros({2, 3, 4}), b = zeros({2, 4, 5});
    REQUIRE_THROWS_AS(masked_matmul(zeros({4}), zeros({4}), ones({1})), ValueError);           // rank 1
    REQUIRE_THROWS_AS(masked_matmul(a, zeros({3, 4, 5}), ones({3, 4})), ValueError);           // leading dims
    REQUIRE_THROWS_AS(masked_matmul(a, zeros({2, 5, 5}), ones({3, 4})), ValueError);           // K 4 vs 5
    REQUIRE_THROWS_AS(masked_matmul(a, b, ones({3, 5})), ValueError);                          // keep (M, N)
    REQUIRE_THROWS_AS(sampled_matmul(a, b, ones({3, 4})), ValueError);                         // keep (M, K)
    REQUIRE_THROWS_AS(sampled_matmul(a, b, Tensor()), ValueError);
    require_value_error([&] { masked_matmul(a, b, ones({3, 5})); }, "keep of shape (3, 5) does not broadcast to (2, 3, 4)");
}
