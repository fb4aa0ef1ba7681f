// tests/test_gradcheck_nn.cpp — the backward of every nn op against finite differences.
//
// Built against xgrad_f64 (real = double; see core/gradcheck.hpp). Covers linear (with and
// without bias, 3-D input), embedding (dense and sparse, duplicate IDs, padding, a non-leaf
// table), cross_entropy (mean/sum/none, ignore_index, label_smoothing, (B, T, C)), nll_loss,
// mse_loss, binary_cross_entropy_with_logits, gelu, and a whole model through nn modules.
// A mutation test shows that duplicate IDs are what catch a scatter that overwrites instead
// of adding.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <type_traits>

#include <xtensor/xview.hpp>

#include "core/autograd.hpp"
#include "core/gradcheck.hpp"
#include "nn/nn.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

namespace {


F::CrossEntropyOptions ce(nn::Reduction r, std::int64_t ignore_index = -100, double smoothing = 0) {
    F::CrossEntropyOptions o;
    o.reduction = r;
    o.ignore_index = ignore_index;
    o.label_smoothing = smoothing;
    return o;
}

}  // namespace

// ==== linear ==========================================================================================

TEST_CASE("gradcheck linear: x - W and b - without bias - (BxTxin) input", "[gradcheck][nn][linear]") {
    manual_seed(1);
    Tensor x = leaf({4, 3}), W = leaf({5, 3}), b = leaf({5});
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, x, W, b);
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1]); }, x, W);
    Tensor x3 = leaf({2, 3, 4}), W3 = leaf({5, 4}), b3 = leaf({5});
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, x3, W3, b3);
    // Only some inputs require grad: x is data, W and b are parameters.
    Tensor data = randn({6, 3});
    REQUIRE_GRADCHECK([data](const auto& v) { return F::linear(data, v[0], v[1]); }, W, b);
    // A 1-D input (in,) → (out,).
    REQUIRE_GRADCHECK([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, leaf({3}), W, b);
}

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
    for (std::size_t p = 0; p < ids.numel(); ++p)
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
        Array y(Shape{ids.numel(), d});
        for (std::size_t p = 0; p < ids.numel(); ++p)
            for (std::size_t j = 0; j < d; ++j) y(p, j) = E.data()(static_cast<std::size_t>(ids[p]), j);
        return make_result(std::move(y), "broken_embedding", {E}, [ids, shape = E.shape(), d](const Array& g, const Array&) {
            Array dE = xt::zeros<real>(shape);
            for (std::size_t p = 0; p < ids.numel(); ++p)
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

// ==== losses ===========================================================================================

TEST_CASE("gradcheck cross_entropy: reductions - ignore_index - label_smoothing", "[gradcheck][nn][loss]") {
    manual_seed(6);
    Tensor x = from_array(Array(3 * randn({5, 4}).data()), true);
    IndexTensor t{0, 3, 1, 1, 2};
    IndexTensor t_ign{0, -100, 1, -100, 2};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None}) {
        INFO("reduction " << static_cast<int>(r));
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t_ign, ce(r)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, -100, 0.2)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t_ign, ce(r, -100, 0.1)); }, x);
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, -100, 1.0)); }, x);
        // A custom ignore_index that is also a class ID.
        REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(r, 1)); }, x);
    }
}

TEST_CASE("gradcheck cross_entropy on (BxTxC) logits with (BxT) targets", "[gradcheck][nn][loss]") {
    manual_seed(7);
    Tensor x = leaf({2, 3, 5});
    IndexTensor t{{0, 4, 2}, {-100, 1, 1}};
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t); }, x);
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(nn::Reduction::None, -100, 0.1)); }, x);
    REQUIRE_GRADCHECK([&](const auto& v) { return F::cross_entropy(v[0], t, ce(nn::Reduction::Sum)); }, x);
}

TEST_CASE("gradcheck nll_loss", "[gradcheck][nn][loss]") {
    manual_seed(8);
    Tensor lp = leaf({4, 3});  // any values: nll_loss is linear in them
    IndexTensor t{2, 0, -100, 1};
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([&](const auto& v) { return F::nll_loss(v[0], t, ce(r)); }, lp);
    // Composed with log_softmax: the unfused cross-entropy.
    REQUIRE_GRADCHECK([&](const auto& v) { return F::nll_loss(log_softmax(v[0], -1), t); }, lp);
}

TEST_CASE("gradcheck mse_loss - both operands", "[gradcheck][nn][loss]") {
    manual_seed(9);
    Tensor a = leaf({3, 4}), b = leaf({3, 4});
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([r](const auto& v) { return F::mse_loss(v[0], v[1], r); }, a, b);
}

TEST_CASE("gradcheck binary_cross_entropy_with_logits", "[gradcheck][nn][loss]") {
    manual_seed(10);
    Tensor x = from_array(Array(4 * randn({3, 4}).data()), true);
    Tensor y = rand({3, 4});  // soft targets in [0, 1)
    y.at({0, 0}) = 0;
    y.at({0, 1}) = 1;
    for (auto r : {nn::Reduction::Mean, nn::Reduction::Sum, nn::Reduction::None})
        REQUIRE_GRADCHECK([&](const auto& v) { return F::binary_cross_entropy_with_logits(v[0], y, r); }, x);
}

// ==== activations, modules ===================================================================================

TEST_CASE("gradcheck gelu", "[gradcheck][nn][activation]") {
    manual_seed(11);
    Tensor x = from_array(Array(3 * randn({4, 5}).data()), true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::gelu(v[0]); }, x);
    Tensor specific({-6, -2.5, -1, -0.3, 0, 0.3, 1, 2.5, 6}, true);
    REQUIRE_GRADCHECK([](const auto& v) { return F::gelu(v[0]); }, specific);
}

TEST_CASE("gradcheck a whole model: Embedding → Linear → GELU → Linear → cross_entropy", "[gradcheck][nn][module]") {
    manual_seed(12);
    struct Net : nn::Module {
        std::shared_ptr<nn::Embedding> emb;
        std::shared_ptr<nn::Sequential> mlp;
        Net() {
            emb = register_module("emb", std::make_shared<nn::Embedding>(7, 3, nn::EmbeddingOptions().set_padding_idx(0)));
            mlp = register_module("mlp", std::make_shared<nn::Sequential>());
            mlp->push_back("fc1", std::make_shared<nn::Linear>(6, 5))
                .push_back("act", std::make_shared<nn::GELU>())
                .push_back("fc2", std::make_shared<nn::Linear>(5, 4));
        }
        // ids (B, 2) → concat of two embeddings (B, 6) → logits (B, 4)
        Tensor forward(const IndexTensor& ids) const {
            const std::int64_t B = static_cast<std::int64_t>(ids.shape()[0]);
            return mlp->forward(emb->forward(ids).reshape({B, 6}));
        }
    } net;
    REQUIRE(net.num_parameters() == 7 * 3 + (6 * 5 + 5) + (5 * 4 + 4));
    IndexTensor ids{{1, 2}, {2, 6}, {5, 5}, {3, 4}};  // no padding ID: every row's derivative is real
    IndexTensor y{0, 3, 3, 1};
    // gradcheck perturbs the parameters in place through the shared handles.
    REQUIRE_GRADCHECK(
        [&](const auto&) { return F::cross_entropy(net.forward(ids), y, ce(nn::Reduction::Mean, -100, 0.05)); },
        net.parameters()[0], net.parameters()[1], net.parameters()[2], net.parameters()[3], net.parameters()[4]);
}
