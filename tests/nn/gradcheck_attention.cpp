// tests/nn/gradcheck_attention.cpp — the composed attention of nn/attention/composed.cpp and
// the module of nn/attention.cpp.
//
// scaled_dot_product_attention is composed from core ops, each gradchecked on its own; these
// check the composition: with and without the causal mask, with a 0/1 mask, with a query whose
// keys are all masked (where a careless softmax gives NaN), and the CausalSelfAttention module
// with respect to its input and every parameter. Shapes: q, k (B, H, T, hd), v (B, H, Tk, hv);
// x (B, T, d).
//
// Built against xgrad_f64 (real = double): central differences in float32 cannot tell a wrong
// formula from rounding (see core/gradcheck.hpp). Its own executable: `cmake --build build --target
// gradcheck_attention && build/tests/gradcheck_attention`.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

namespace {

// All of dL/dx finite, for every input.
void require_finite_grads(const std::vector<Tensor>& xs) {
    for (const Tensor& x : xs) {
        REQUIRE(x.grad().defined());
        for (real g : x.grad().data()) REQUIRE(std::isfinite(g));
    }
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: gradcheck without a mask") {
    manual_seed(1);
    Tensor q = leaf({2, 2, 3, 4}), k = leaf({2, 2, 3, 4}), v = leaf({2, 2, 3, 4});
    REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2]); },
                      q, k, v);
}

TEST_CASE("scaled_dot_product_attention: gradcheck causal") {
    manual_seed(2);
    Tensor q = leaf({2, 2, 4, 3}), k = leaf({2, 2, 4, 3}), v = leaf({2, 2, 4, 3});
    REQUIRE_GRADCHECK(
        [](const std::vector<Tensor>& in) {
            return F::scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), /*is_causal=*/true);
        },
        q, k, v);
}

TEST_CASE("scaled_dot_product_attention: gradcheck with a 0/1 mask broadcast over heads") {
    manual_seed(3);
    Tensor q = leaf({2, 2, 3, 4}), k = leaf({2, 2, 3, 4}), v = leaf({2, 2, 3, 4});
    // (B, 1, Tq, Tk): every query keeps at least one key
    Tensor mask({{{{1, 0, 1}, {0, 1, 1}, {1, 1, 0}}}, {{{0, 0, 1}, {1, 1, 1}, {1, 0, 0}}}});
    REQUIRE_GRADCHECK(
        [mask](const std::vector<Tensor>& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], mask); },
        q, k, v);
}

TEST_CASE("scaled_dot_product_attention: gradcheck with a fully masked row") {
    manual_seed(4);
    Tensor q = leaf({1, 2, 3, 4}), k = leaf({1, 2, 3, 4}), v = leaf({1, 2, 3, 4});
    Tensor mask({{1, 1, 0}, {0, 0, 0}, {0, 1, 1}});  // (Tq, Tk): query 1 may attend nothing
    auto f = [mask](const std::vector<Tensor>& in) {
        return F::scaled_dot_product_attention(in[0], in[1], in[2], mask);
    };
    REQUIRE_GRADCHECK(f, q, k, v);
    require_finite_grads({q, k, v});
    // query 1's gradient is exactly 0: its output is the constant 0
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t j = 0; j < 4; ++j) REQUIRE(q.grad().at({0, h, 1, j}) == 0);
}

TEST_CASE("scaled_dot_product_attention: gradcheck cross-attention with an explicit scale") {
    manual_seed(5);
    // Tq 2, Tk 4, hd 3, hv 2, and no leading dims at all
    Tensor q = leaf({2, 3}), k = leaf({4, 3}), v = leaf({4, 2});
    REQUIRE_GRADCHECK(
        [](const std::vector<Tensor>& in) {
            return F::scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), /*is_causal=*/true, 0.0, 0.7);
        },
        q, k, v);
}

TEST_CASE("attention_weights: gradcheck causal") {
    manual_seed(6);
    Tensor q = leaf({1, 2, 4, 2}), k = leaf({1, 2, 4, 2});
    REQUIRE_GRADCHECK(
        [](const std::vector<Tensor>& in) { return F::attention_weights(in[0], in[1], Tensor(), true); }, q, k);
}

namespace {

// Gradcheck of a CausalSelfAttention with respect to x and every parameter (4 or 8).
void gradcheck_module(const nn::CausalSelfAttention& m, const Tensor& x, const Tensor& mask) {
    std::vector<Tensor> inputs{x};
    for (const auto& [name, p] : m.named_parameters()) inputs.push_back(p);
    REQUIRE(inputs.size() >= 5);
    const GradcheckResult r =
        gradcheck([&m, mask](const std::vector<Tensor>& in) { return m.forward(in[0], mask); }, inputs);
    INFO(r.message);
    REQUIRE(r.checked == x.numel() + m.num_parameters());
    REQUIRE(r.ok);
}

}  // namespace

TEST_CASE("CausalSelfAttention: gradcheck of the input and every parameter") {
    manual_seed(7);
    nn::CausalSelfAttention m(/*d=*/4, /*n_head=*/2);
    gradcheck_module(m, leaf({2, 3, 4}), Tensor());
}

TEST_CASE("CausalSelfAttention: gradcheck with a key-padding mask") {
    manual_seed(8);
    nn::CausalSelfAttention m(/*d=*/4, /*n_head=*/2);
    Tensor pad = Tensor({{1, 1, 1}, {1, 0, 0}}).reshape({2, 1, 1, 3});  // (B, 1, 1, T)
    gradcheck_module(m, leaf({2, 3, 4}), pad);
}

TEST_CASE("CausalSelfAttention: gradcheck of the composed branches - fast_kernels off, and dropout") {
    manual_seed(11);
    nn::CausalSelfAttention composed(/*d=*/4, /*n_head=*/2, nn::CausalSelfAttentionOptions().fast_kernels(false));
    gradcheck_module(composed, leaf({2, 3, 4}), Tensor());
    // dropout: the same seed before every forward makes the draws, hence the function, fixed
    nn::CausalSelfAttention dropped(/*d=*/4, /*n_head=*/2, nn::CausalSelfAttentionOptions().dropout(0.3));
    const Tensor x = leaf({2, 3, 4});
    std::vector<Tensor> inputs{x};
    for (const auto& [name, p] : dropped.named_parameters()) inputs.push_back(p);
    const GradcheckResult r = gradcheck(
        [&dropped](const std::vector<Tensor>& in) {
            manual_seed(12);
            return dropped.forward(in[0]);
        },
        inputs);
    INFO(r.message);
    REQUIRE(r.ok);
}

TEST_CASE("attention_weights: gradcheck with a mask and a fully masked row") {
    manual_seed(13);
    Tensor q = leaf({2, 3, 2}), k = leaf({2, 3, 2});
    const Tensor mask({{1, 0, 1}, {0, 0, 0}, {0, 1, 1}});
    REQUIRE_GRADCHECK([mask](const std::vector<Tensor>& in) { return F::attention_weights(in[0], in[1], mask); }, q,
                      k);
}

TEST_CASE("CausalSelfAttention: gradcheck with rope") {
    manual_seed(9);
    nn::CausalSelfAttention m(/*d=*/8, /*n_head=*/2, nn::CausalSelfAttentionOptions().rope(true));
    gradcheck_module(m, leaf({1, 3, 8}), Tensor());
}

// Grouped-query attention: each K/V head's gradient sums its g query heads' (concat's backward),
// in both projection layouts, with rope as LLaMA's block uses it.
TEST_CASE("CausalSelfAttention: gradcheck with grouped-query and multi-query attention") {
    manual_seed(10);
    for (std::int64_t kv : {1, 2}) {
        INFO("n_kv_head " << kv);
        nn::CausalSelfAttention fused_names(8, 4, nn::CausalSelfAttentionOptions().n_kv_head(kv));
        gradcheck_module(fused_names, leaf({2, 3, 8}), Tensor());
        nn::CausalSelfAttention llama(
            8, 4, nn::CausalSelfAttentionOptions().n_kv_head(kv).rope(true).bias(false).llama_names(true));
        gradcheck_module(llama, leaf({1, 4, 8}), Tensor());
    }
}

// ---- examples/README.md's multi-head attention from core ops ---------------------------------
// The same code as in examples/README.md (attention_basics), compiled and checked here: it equals CausalSelfAttention
// given the same c_attn and c_proj, and it gradchecks.
namespace {

// x (B, T, d) → (B, T, d): multi-head causal self-attention from core ops
Tensor attention(const Tensor& x, const nn::Linear& c_attn, const nn::Linear& c_proj, std::int64_t H) {
    const auto B = x.size(0), T = x.size(1), d = x.size(2);
    const std::int64_t hd = d / H;                                           // head width
    std::vector<Tensor> qkv = split(c_attn.forward(x), d, -1);               // q, k, v (B, T, d)
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, hd}).transpose(1, 2); };
    Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);         // (B, H, T, hd)
    Tensor scores = matmul(q, k.transpose(-2, -1)) / std::sqrt(real(hd));   // (B, H, T, T)
    Tensor future = triu(ones({x.size(1), x.size(1)}), 1);                  // 1 where key > query
    Tensor weights = softmax(masked_fill(scores, future, -INFINITY), -1);   // rows sum to 1
    Tensor y = matmul(weights, v);                                           // (B, H, T, hd)
    y = y.transpose(1, 2).reshape({B, T, d});                                // heads side by side
    return c_proj.forward(y);                                                // (B, T, d)
}

}  // namespace

TEST_CASE("README multi-head causal attention equals CausalSelfAttention and gradchecks") {
    manual_seed(10);
    nn::CausalSelfAttention m(/*d=*/6, /*n_head=*/3);
    const Tensor x = leaf({2, 4, 6});
    require_values(attention(x, *m.c_attn, *m.c_proj, 3), m.forward(x), 1e-12);
    REQUIRE_GRADCHECK([&m](const std::vector<Tensor>& in) { return attention(in[0], *m.c_attn, *m.c_proj, 3); },
                      x, m.c_attn->weight, m.c_proj->weight);
}
