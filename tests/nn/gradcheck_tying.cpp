// tests/nn/gradcheck_tying.cpp — a tiny tied language model against finite differences:
// the shared table's gradient (lookup scatter + head matmul, summed) is checked as a whole.
//
// Built against xgrad_f64 (real = double; see core/gradcheck.hpp).
// Legend: B batch, T time, V vocabulary, d width.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck a tied model: logits = tanh(E[ids]) Eᵀ + b", "[gradcheck][tying]") {
    for (bool sparse : {false, true}) {
        INFO("sparse table: " << sparse);
        nn::Embedding wte(5, 3, nn::EmbeddingOptions().sparse(sparse));
        nn::Linear head(3, 5);
        nn::tie_weights(head, wte);
        const IndexTensor ids{{0, 3, 3}, {4, 1, 3}};  // (B, T) = (2, 3), with repeats
        // gradcheck perturbs the table it is given, which is the one both modules read.
        REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return head.forward(wte.forward(ids).tanh()); },
                          wte.weight, head.bias);
        const IndexTensor targets{{1, 1, 0}, {2, 4, 3}};
        REQUIRE_GRADCHECK(
            [&](const std::vector<Tensor>&) { return F::cross_entropy(head.forward(wte.forward(ids).tanh()), targets); },
            wte.weight);
    }
}
