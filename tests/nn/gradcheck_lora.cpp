// tests/nn/gradcheck_lora.cpp — a Linear with a LoRA adapter (nn/lora.hpp): the gradients of the
// input, A and B against finite differences, with B away from zero (at B = 0, dA = 0 and a wrong
// dA would pass), at α/r and rsLoRA's α/√r, on a (B, T, in) input, on parts of a fused q|k|v;
// the fused op functional::lora_linear with every input trained; and the adapter of an Embedding.
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_lora && build/tests/gradcheck_lora`.
#include <catch2/catch.hpp>

#include <type_traits>

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(std::is_same_v<real, double>, "the gradcheck tests must link xgrad_f64");

TEST_CASE("gradcheck LoRA Linear: x, A and B - α/r and α/√r - (BxTxin) input", "[gradcheck][nn][lora]") {
    manual_seed(3);
    for (const bool rslora : {false, true}) {
        nn::Linear fc(5, 4);
        nn::LoRA& lora = nn::add_lora(fc, nn::LoRAOptions().rank(2).alpha(3).use_rslora(rslora));
        lora.B->weight.mutable_data() = randn({4, 2}).data();
        const Tensor A = lora.A->weight, B = lora.B->weight;
        REQUIRE_GRADCHECK([&fc](const auto& v) { return fc.forward(v[0]); }, leaf({3, 5}), A, B);
        REQUIRE_GRADCHECK([&fc](const auto& v) { return fc.forward(v[0]); }, leaf({2, 3, 5}), A, B);
    }
}

TEST_CASE("gradcheck functional::lora_linear, the fused op: x, W, b, A and B", "[gradcheck][nn][lora]") {
    manual_seed(6);
    // Every input a leaf (an unfrozen base too), B away from zero, with and without a bias.
    const Tensor W = leaf({4, 5}), b = leaf({4}), A = leaf({2, 5}), B = leaf({4, 2});
    REQUIRE_GRADCHECK([](const auto& v) { return nn::functional::lora_linear(v[0], v[1], v[2], v[3], v[4], 1.5); },
                      leaf({2, 3, 5}), W, b, A, B);
    REQUIRE_GRADCHECK([](const auto& v) { return nn::functional::lora_linear(v[0], v[1], Tensor(), v[2], v[3], 1.5); },
                      leaf({3, 5}), W, A, B);
}

TEST_CASE("gradcheck LoRA on parts of a fused q|k|v: x, A and B - (q, v) and (k, v) adapted", "[gradcheck][nn][lora]") {
    manual_seed(4);
    // Linear 5 → 4 + 2 + 2 (q, k, v of grouped-query attention), r = 2; B drawn away from zero.
    for (const std::vector<bool>& adapted : {std::vector<bool>{true, false, true}, std::vector<bool>{false, true, true}}) {
        nn::Linear qkv(5, 8);
        nn::LoRA& lora = nn::add_lora(qkv, nn::LoRAOptions().rank(2).alpha(3).parts({4, 2, 2}, adapted));
        lora.B->weight.mutable_data() = randn(lora.B->weight.shape()).data();
        const Tensor A = lora.A->weight, B = lora.B->weight;
        REQUIRE_GRADCHECK([&qkv](const auto& v) { return qkv.forward(v[0]); }, leaf({3, 5}), A, B);
        REQUIRE_GRADCHECK([&qkv](const auto& v) { return qkv.forward(v[0]); }, leaf({2, 3, 5}), A, B);
    }
}

TEST_CASE("gradcheck LoRA Embedding: A and B, a token repeated", "[gradcheck][nn][lora]") {
    manual_seed(5);
    // Aᵀ drawn away from zero (at A = 0, dB = 0 and a wrong dB would pass); ID 3 twice. (A padding
    // row is read but gets no gradient by definition, as in PyTorch, so it is left out here.)
    nn::Embedding table(7, 4);
    nn::LoRAEmbedding& lora = nn::add_lora(table, nn::LoRAOptions().rank(2).alpha(3));
    lora.A->weight.mutable_data() = randn({7, 2}).data();
    const Tensor A = lora.A->weight, B = lora.B->weight;
    const IndexTensor ids{{3, 1, 3}, {0, 6, 2}};
    REQUIRE_GRADCHECK([&table, &ids](const auto&) { return table.forward(ids); }, A, B);
}
