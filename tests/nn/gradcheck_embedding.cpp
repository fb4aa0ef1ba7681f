// tests/nn/gradcheck_embedding.cpp — functional::embedding (dense and sparse, duplicate IDs, padding)
// against finite differences; duplicate IDs are what catch a scatter that overwrites instead
// of adding.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_embedding && build/tests/gradcheck_embedding`.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <type_traits>

#include <xtensor/xview.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

// ==== embedding =======================================================================================

TEST_CASE("gradcheck embedding - dense: duplicate IDs sum", "[gradcheck][nn][embedding]") {
    manual_seed(2);
    Tensor E = leaf({6, 3});
    IndexTensor ids{{1, 3, 3}, {0, 5, 1}};  // rows 1 and 3 twice, rows 2 and 4 never
    REQUIRE_GRADCHECK([ids](const auto& v) { return F::embedding(v[0], ids); }, E);
    // A non-leaf table (E · 2): the gradient flows back through a fresh (V, d) array.
    REQUIRE_GRADCHECK([ids](const auto& v) { return F::embedding(v[0] * 2.0, ids); }, E);
    // The same ID many times in one batch.
    IndexTensor same{{4, 4, 4, 4}};
    REQUIRE_GRADCHECK([same](const auto& v) { return F::embedding(v[0], same); }, E);
}

TEST_CASE("gradcheck embedding - sparse: gradcheck reads sparse_grad()->to_dense()", "[gradcheck][nn][embedding]") {
    manual_seed(3);
    Tensor E = leaf({6, 3});
    IndexTensor ids{{1, 3, 3}, {0, 5, 1}};
    REQUIRE_GRADCHECK([ids](const auto& v) { return F::embedding(v[0], ids, {}, /*sparse=*/true); }, E);
    REQUIRE(E.sparse_grad() != nullptr);
    REQUIRE(E.sparse_grad()->indices == std::vector<std::int64_t>{0, 1, 3, 5});
}

TEST_CASE("gradcheck embedding with padding_idx", "[gradcheck][nn][embedding]") {
    // padding_idx is a deliberate exception to calculus: the forward reads the padding row,
    // but it gets no gradient (it is held at its value, usually 0). To compare with finite
    // differences, the function masks the padding positions' outputs, so the true derivative
    // of the padding row is 0 as well; every other row, with duplicates, is checked as usual.
    manual_seed(4);
    const std::int64_t pad = 3;
    IndexTensor ids{{1, 3, 3}, {0, 5, 1}, {3, 2, 2}};
    Array mask_a = xt::ones<real>({3, 3, 2});
    for (std::int64_t p = 0; p < ids.numel(); ++p)
        if (ids[p] == pad) xt::view(mask_a, p / 3, p % 3) = 0;
    Tensor mask = from_array(mask_a);
    for (bool sparse : {false, true}) {
        INFO("sparse = " << sparse);
        Tensor E = leaf({6, 2});
        REQUIRE_GRADCHECK([&](const auto& v) { return F::embedding(v[0], ids, pad, sparse) * mask; }, E);
        // Negative padding_idx: -3 is row 3 of 6.
        REQUIRE_GRADCHECK([&](const auto& v) { return F::embedding(v[0], ids, -3, sparse) * mask; }, E);
    }
    // Without the mask the padding row still gets exactly 0, although the loss depends on it.
    Tensor E = leaf({6, 2});
    F::embedding(E, ids, pad).sum().backward();
    REQUIRE(E.grad().at({3, 0}) == 0);
    REQUIRE(E.grad().at({3, 1}) == 0);
    REQUIRE(E.grad().at({2, 0}) == 2);
}

TEST_CASE("gradcheck catches a row scatter that overwrites instead of adding", "[gradcheck][nn][embedding][mutation]") {
    // A broken embedding: dE[ids[p]] = g[p] (=), so a duplicate keeps only its last row.
    auto broken = [](const Tensor& E, const IndexTensor& ids) {
        const std::size_t d = E.shape()[1];
        Array y(ArrayShape{ids.data().size(), d});
        for (std::int64_t p = 0; p < ids.numel(); ++p)
            for (std::size_t j = 0; j < d; ++j) y(p, j) = E.data()(static_cast<std::size_t>(ids[p]), j);
        return make_result(std::move(y), "broken_embedding", {E}, [ids, shape = E.shape(), d](const Array& g, const Array&) {
            Array dE = xt::zeros<real>(shape);
            for (std::int64_t p = 0; p < ids.numel(); ++p)
                for (std::size_t j = 0; j < d; ++j) dE(static_cast<std::size_t>(ids[p]), j) = g(p, j);  // the bug
            return Grads{std::move(dE)};
        });
    };
    manual_seed(5);
    Tensor E = leaf({5, 2});
    IndexTensor unique{0, 2, 4}, dup{0, 2, 2};
    REQUIRE(gradcheck([&](const auto& v) { return broken(v[0], unique); }, {E}).ok);  // unique IDs hide it
    const GradcheckResult r = gradcheck([&](const auto& v) { return broken(v[0], dup); }, {E});
    REQUIRE_FALSE(r.ok);  // duplicates expose it
    REQUIRE_GRADCHECK([&](const auto& v) { return F::embedding(v[0], dup); }, E);  // the real op passes
}
