// tests/nn/gradcheck_module.cpp — a whole model built from nn modules (Embedding → Linear → GELU →
// Linear → cross_entropy) against finite differences, every parameter at once.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_module && build/tests/gradcheck_module`.
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

TEST_CASE("gradcheck a whole model: Embedding → Linear → GELU → Linear → cross_entropy", "[gradcheck][nn][module]") {
    manual_seed(12);
    struct Net : nn::Module {
        std::shared_ptr<nn::Embedding> emb;
        std::shared_ptr<nn::Sequential> mlp;
        Net() {
            emb = register_module("emb", std::make_shared<nn::Embedding>(7, 3, nn::EmbeddingOptions().padding_idx(0)));
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
