// tests/nn/attention/test_fused.cpp — the fused kernel fused_causal_attention (nn/attention/fused.cpp)
// against its oracle, the composed scaled_dot_product_attention with is_causal (nn/attention/composed.cpp).
// Values and the gradients of q, k and v for a G whose entries all differ, to 1e-5, on shapes
// with Tq = Tk, Tq < Tk and Tq > Tk, no leading dims and two, head widths that are and are not a
// multiple of the SIMD width, and a given scale. The packed form, which reads the heads from c_attn's
// (B, T, 3d) output, against the same oracle with the heads split and merged around it. Then
// CausalSelfAttention with fast_kernels on and off. Shapes: q (..., Tq, hd), k (..., Tk, hd),
// v (..., Tk, hv); x (B, T, d).
// The double-precision gradcheck of the kernel alone is in gradcheck_fused.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/slicing.hpp>
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

TEST_CASE("fused_causal_attention equals the composed scaled_dot_product_attention - values and gradients",
          "[nn][attention][fused]") {
    struct Case {
        Shape lead;
        std::int64_t Tq, Tk, hd, hv;
        std::optional<double> scale;
    };
    const Case cases[] = {{{2, 3}, 16, 16, 8, 8, std::nullopt}, {{3}, 5, 9, 3, 6, std::nullopt},
                          {{3}, 9, 5, 4, 2, 0.7},              {{}, 7, 7, 13, 5, std::nullopt},
                          {{1, 2}, 33, 33, 32, 32, std::nullopt}};
    manual_seed(31);
    for (const Case& c : cases) {
        INFO("Tq " << c.Tq << ", Tk " << c.Tk << ", hd " << c.hd << ", hv " << c.hv);
        auto with = [&](Shape tail) {
            Shape s = c.lead;
            s.insert(s.end(), tail.begin(), tail.end());
            return s;
        };
        const Tensor q0 = randn(with({c.Tq, c.hd})), k0 = randn(with({c.Tk, c.hd})), v0 = randn(with({c.Tk, c.hv}));
        const Tensor G = randn(with({c.Tq, c.hv}));
        Tensor qf = q0.detach().requires_grad_(), kf = k0.detach().requires_grad_(), vf = v0.detach().requires_grad_();
        Tensor qc = q0.detach().requires_grad_(), kc = k0.detach().requires_grad_(), vc = v0.detach().requires_grad_();
        Tensor yf = F::fused_causal_attention(qf, kf, vf, c.scale);
        Tensor yc = F::scaled_dot_product_attention(qc, kc, vc, Tensor(), /*is_causal=*/true, 0.0, c.scale);
        require_values(yf, yc, 1e-5);
        yf.backward(G);
        yc.backward(G);
        require_values(qf.grad(), qc.grad(), 1e-5);
        require_values(kf.grad(), kc.grad(), 1e-5);
        require_values(vf.grad(), vc.grad(), 1e-5);
    }
}

TEST_CASE("fused_causal_attention: row 0 is v's first row - and no gradient reaches later keys from it",
          "[nn][attention][fused]") {
    // Query 0 sees key 0 only: weight 1, so out[0] = v[0]; keys 1.. get no gradient from row 0.
    Tensor q = Tensor({{1, 2}, {3, 4}, {5, 6}}, true), k = Tensor({{1, 0}, {0, 1}, {1, 1}}, true);
    Tensor v = Tensor({{7, 8}, {9, 10}, {11, 12}}, true);
    Tensor y = F::fused_causal_attention(q, k, v, 1.0);
    REQUIRE(y.at({0, 0}) == 7.0f);
    REQUIRE(y.at({0, 1}) == 8.0f);
    y.backward(Tensor({{1, 1}, {0, 0}, {0, 0}}));  // only row 0's output matters
    require_values(v.grad(), {{1, 1}, {0, 0}, {0, 0}});
    require_values(k.grad(), {{0, 0}, {0, 0}, {0, 0}});  // a weight of exactly 1 does not move
    require_values(q.grad(), {{0, 0}, {0, 0}, {0, 0}});
}

TEST_CASE("fused_causal_attention: bad shapes throw ValueError naming the op", "[nn][attention][fused]") {
    using Catch::Matchers::Contains;
    const Tensor q = zeros({2, 3, 4});
    CHECK_THROWS_WITH(F::fused_causal_attention(q, zeros({2, 3, 5}), zeros({2, 3, 4})),
                      Contains("fused_causal_attention") && Contains("head width"));
    CHECK_THROWS_WITH(F::fused_causal_attention(q, q, zeros({2, 2, 4})),
                      Contains("fused_causal_attention") && Contains("number of keys"));
    CHECK_THROWS_AS(F::fused_causal_attention(zeros({4}), zeros({4}), zeros({4})), ValueError);
}

// T = 2^20 with hd = 1: q, k and v take 4 MiB each, the weights P (N, T, T) 4 TiB per head, more
// than any machine this runs on. Refused with the bytes and the way out before anything is
// allocated: with overcommit, malloc could hand out P and the kernel kill the process filling it.
// With a backward to come, its scratch, one (T, T) per thread, is counted too.
TEST_CASE("fused_causal_attention: weights larger than physical memory are refused before allocating",
          "[nn][attention][fused][regression]") {
    const std::size_t T = std::size_t(1) << 20;
    const double memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
    const auto message = [&](const char* op, std::size_t scratch) {
        const double bytes = double(2 + scratch) * double(T) * double(T) * sizeof(real);
        REQUIRE(bytes > memory);
        return fmt::format("{}: the attention weights of N = 2 heads, (Tq, Tk) = (1048576, 1048576) each{}, need "
                           "{:.0f} bytes ({:.1f} GiB), more than this machine's physical memory ({:.1f} GiB); "
                           "tiled_causal_attention (nn/attention/tiled.hpp) computes the same without them, as "
                           "CausalSelfAttention does from T = 256", op,
                           scratch ? fmt::format(", and the backward's scratch of {} more (one per thread)", scratch) : "",
                           bytes, bytes / double(1 << 30), memory / double(1 << 30));
    };
    const Tensor q = zeros({2, std::int64_t(T), 1});
    CHECK(message_of<OutOfMemoryError>([&] { F::fused_causal_attention(q, q, q); }) ==
          message("fused_causal_attention", 0));
    const Tensor qkv = zeros({1, std::int64_t(T), 6}, /*requires_grad=*/true);
    const std::size_t threads = std::min<std::size_t>(2, std::size_t(get_pool_threads()));
    CHECK(message_of<OutOfMemoryError>([&] { F::fused_causal_attention_packed(qkv, 2); }) ==
          message("fused_causal_attention_packed", threads));
}

// The packed form against the split it skips: q, k, v narrowed from qkv, each (B, T, H, hd) →
// (B, H, T, hd), the composed oracle, and the heads merged back to (B, T, d).
TEST_CASE("fused_causal_attention_packed equals the heads split, the composed attention, the heads merged",
          "[nn][attention][fused]") {
    struct Case {
        std::int64_t B, T, H, hd;
        std::optional<double> scale;
    };
    const Case cases[] = {{2, 16, 3, 8, std::nullopt}, {1, 9, 1, 5, 0.6}, {3, 33, 4, 32, std::nullopt},
                          {2, 1, 2, 3, std::nullopt}};
    manual_seed(37);
    for (const Case& c : cases) {
        INFO("B " << c.B << ", T " << c.T << ", H " << c.H << ", hd " << c.hd);
        const std::int64_t d = c.H * c.hd;
        const Tensor x0 = randn({c.B, c.T, 3 * d}), G = randn({c.B, c.T, d});
        Tensor xp = x0.detach().requires_grad_(), xs = x0.detach().requires_grad_();
        Tensor yp = F::fused_causal_attention_packed(xp, c.H, c.scale);
        auto heads = [&](std::int64_t part) {
            return narrow(xs, -1, part * d, d).reshape({c.B, c.T, c.H, c.hd}).transpose(1, 2);
        };
        Tensor ys = F::scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), /*is_causal=*/true, 0.0,
                                                    c.scale)
                        .transpose(1, 2)
                        .reshape({c.B, c.T, d});
        REQUIRE(yp.shape() == Shape{c.B, c.T, d});
        require_values(yp, ys, 1e-5);
        yp.backward(G);
        ys.backward(G);
        require_values(xp.grad(), xs.grad(), 1e-5);
    }
}

TEST_CASE("fused_causal_attention_packed: bad shapes and n_head throw ValueError naming the op - empty B, T give empty y",
          "[nn][attention][fused]") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(F::fused_causal_attention_packed(zeros({2, 3, 12}), 0),
                      Contains("fused_causal_attention_packed") && Contains("n_head"));
    CHECK_THROWS_WITH(F::fused_causal_attention_packed(zeros({2, 3, 12}), 3),
                      Contains("fused_causal_attention_packed") && Contains("multiple of 3 · n_head = 9"));
    CHECK_THROWS_WITH(F::fused_causal_attention_packed(zeros({2, 3, 0}), 1), Contains("positive multiple"));
    // An n_head whose 3 · n_head passes 2^64 in size_t: 3 · 6148914691236517206 = 2^64 + 2 wraps to
    // 2, 3 · 6148914691236517208 to 8 and 3 · (2^63 - 1) to 2^63 - 3. None may pass as a divisor of
    // the last dim (hd would be 0, with B · n_head weight matrices), nor show wrapped in the message.
    for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{2, 6148914691236517206},
                              {8, 6148914691236517208}, {6, 9223372036854775807}}) {
        const std::int64_t last = shape.first, n_head = shape.second;  // named, not bound: lambdas capture them
        INFO("last dim " << last << ", n_head " << n_head);
        const Tensor qkv = zeros({1, 2, last});
        const std::string msg = message_of<ValueError>([&] { F::fused_causal_attention_packed(qkv, n_head, 1.0); });
        CHECK_THAT(msg, Contains("fused_causal_attention_packed") && Contains(std::to_string(n_head)));
        CHECK_THAT(msg, !Contains("9223372036854775805"));
        CHECK_THAT(message_of<ValueError>([&] { F::fused_causal_attention_packed(qkv, n_head); }), !Contains("scale"));
    }
    CHECK_THROWS_WITH(F::fused_causal_attention_packed(zeros({3, 12}), 2),
                      Contains("fused_causal_attention_packed") && Contains("(B, T, 3·d)"));
    CHECK_THROWS_AS(F::fused_causal_attention_packed(Tensor(), 2), ValueError);
    CHECK_THROWS_WITH(F::fused_causal_attention_packed(zeros({1, 2, 6}), 1, std::nan("")), Contains("scale"));
    for (const Shape& s : {Shape{0, 4, 12}, Shape{2, 0, 12}}) {
        Tensor x = zeros(s).requires_grad_();
        Tensor y = F::fused_causal_attention_packed(x, 2);
        REQUIRE(y.shape() == Shape{s[0], s[1], 4});
        y.sum().backward();
        REQUIRE(x.grad().shape() == s);
    }
}

TEST_CASE("CausalSelfAttention: the fused and the composed path give the same values and gradients",
          "[nn][attention][fused]") {
    manual_seed(5);
    const auto fused_opts = nn::CausalSelfAttentionOptions();
    const auto composed_opts = nn::CausalSelfAttentionOptions().fast_kernels(false);
    nn::CausalSelfAttention fused(/*d=*/12, /*n_head=*/3, fused_opts), composed(12, 3, composed_opts);
    composed.load_state_dict(fused.state_dict());
    const Tensor x0 = randn({2, 10, 12}), G = randn({2, 10, 12});
    Tensor xf = x0.detach().requires_grad_(), xc = x0.detach().requires_grad_();
    Tensor yf = fused.forward(xf), yc = composed.forward(xc);
    REQUIRE(graph_has(yf, "fused_causal_attention_packed"));  // the two paths really differ
    REQUIRE_FALSE(graph_has(yf, "narrow"));                   // the heads read in place
    REQUIRE_FALSE(graph_has(yf, "permute"));
    REQUIRE_FALSE(graph_has(yc, "fused_causal_attention_packed"));
    REQUIRE(graph_has(yc, "softmax"));
    require_values(yf, yc, 1e-5);
    yf.backward(G);
    yc.backward(G);
    require_values(xf.grad(), xc.grad(), 1e-5);
    require_values(fused.c_attn->weight.grad(), composed.c_attn->weight.grad(), 1e-5);
    require_values(fused.c_proj->weight.grad(), composed.c_proj->weight.grad(), 1e-5);
}
