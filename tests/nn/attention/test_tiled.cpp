// tests/nn/attention/test_tiled.cpp — the tiled kernel tiled_causal_attention (nn/attention/tiled.cpp)
// against its oracle, the composed scaled_dot_product_attention with is_causal, or with the mask
// tril(ones({Tq, Tk}), diagonal) for another diagonal (nn/attention/composed.cpp).
// Values and the gradients of q, k and v for a G whose entries all differ, to 1e-5, on sizes below,
// at and across the tiles (64 and 256 rows or keys), Tq < Tk and Tq > Tk, no leading dims and two; rows that see no
// key; a NaN or an inf in a future key and value; one and two threads; one case by hand; and
// CausalSelfAttention's choice of kernel. Shapes: q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv).
// The double-precision gradcheck of the kernel alone is in gradcheck_tiled.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/masking.hpp>
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/tiled.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

namespace {

struct Case {
    Shape lead;
    std::int64_t Tq, Tk, hd, hv;
    std::int64_t diagonal = 0;
    std::optional<double> scale = std::nullopt;
};

Shape with_lead(const Shape& lead, Shape tail) {
    tail.insert(tail.begin(), lead.begin(), lead.end());
    return tail;
}

// out and the gradients of Σ out ⊙ G for q, k, v (fresh leaves with the given values).
struct Run {
    Tensor out, dq, dk, dv;
};
template <class Attention>
Run run(Attention attention, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& G) {
    Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
    Tensor out = attention(q, k, v);
    weighted_sum(out, G).backward();
    return {out, q.grad(), k.grad(), v.grad()};
}

Run tiled(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& G) {
    return run([&](const Tensor& a, const Tensor& b, const Tensor& d) {
        return F::tiled_causal_attention(a, b, d, c.scale, c.diagonal);
    }, q, k, v, G);
}

// The oracle: is_causal for diagonal 0 (PyTorch's convention), else the mask tril(ones, diagonal).
Run oracle(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& G) {
    return run([&](const Tensor& a, const Tensor& b, const Tensor& d) {
        if (c.diagonal == 0) return F::scaled_dot_product_attention(a, b, d, Tensor(), true, 0.0, c.scale);
        const Tensor keep = tril(ones({c.Tq, c.Tk}), c.diagonal);
        return F::scaled_dot_product_attention(a, b, d, keep, false, 0.0, c.scale);
    }, q, k, v, G);
}

void require_same(const Run& a, const Run& b) {
    require_values(a.out, b.out, 1e-5);
    require_values(a.dq, b.dq, 1e-5);
    require_values(a.dk, b.dk, 1e-5);
    require_values(a.dv, b.dv, 1e-5);
}

// Every element of a equals b's (to 1e-5), or both are NaN.
void require_values_or_both_nan(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    for (std::int64_t i = 0; i < a.numel(); ++i) {
        const real x = a.data().data()[i], y = b.data().data()[i];
        INFO("flat element " << i << ": " << x << " against " << y);
        if (std::isnan(x) || std::isnan(y)) REQUIRE((std::isnan(x) && std::isnan(y)));
        else REQUIRE(x == Approx(y).epsilon(1e-5).margin(1e-5));
    }
}

Tensor first_rows(const Tensor& x, std::int64_t n) { return narrow(x, -2, 0, n); }

}  // namespace

TEST_CASE("tiled_causal_attention equals the composed oracle - values and gradients, across tiles",
          "[nn][attention][tiled]") {
    // T = 1, 7: inside one tile; 64: exactly one; 65, 200: a partial tile of 64; 257: of 256 too.
    // Tq ≠ Tk both ways, the triangle top-left (0), bottom-right (Tk − Tq) and cut off (negative).
    const Case cases[] = {
        {{}, 1, 1, 4, 3},           {{2, 3}, 7, 7, 8, 8},      {{1, 2}, 64, 64, 32, 32},
        {{}, 65, 65, 13, 5},        {{2}, 200, 200, 32, 32},   {{1, 1}, 257, 257, 16, 16, 0, 0.3},
        {{2}, 65, 200, 8, 4},       {{2}, 200, 65, 8, 4},      {{2}, 65, 200, 8, 4, 200 - 65},
        {{2}, 200, 65, 8, 4, 65 - 200}, {{3}, 130, 130, 8, 8, -70}, {{}, 7, 257, 5, 5, 250},
    };
    manual_seed(23);
    for (const Case& c : cases) {
        INFO("Tq " << c.Tq << ", Tk " << c.Tk << ", hd " << c.hd << ", hv " << c.hv << ", diagonal " << c.diagonal);
        const Tensor q = randn(with_lead(c.lead, {c.Tq, c.hd})), k = randn(with_lead(c.lead, {c.Tk, c.hd}));
        const Tensor v = randn(with_lead(c.lead, {c.Tk, c.hv})), G = randn(with_lead(c.lead, {c.Tq, c.hv}));
        require_same(tiled(c, q, k, v, G), oracle(c, q, k, v, G));
    }
}

TEST_CASE("tiled_causal_attention by hand: T = 2, hd = 1, and rows that see no key", "[nn][attention][tiled]") {
    // q = (1, 2), k = (0, 1), v = (3, 5), scale 1, loss Σ out.
    //   row 0 sees key 0 only: out_0 = v_0 = 3, its weight is exactly 1 and sends no gradient to S.
    //   row 1: S = (2·0, 2·1) = (0, 2), P = (1, e²) / (1 + e²) = (0.1192029, 0.8807971),
    //          out_1 = 3·0.1192029 + 5·0.8807971 = 4.7615942.
    //   dP_1 = (3, 5), D_1 = out_1: dS_1 = P ⊙ (dP − D) = (−0.2099872, 0.2099872);
    //   dq_1 = dS_1 · k = 0.2099872, dk = dS_1 · q_1 = 2 · dS_1 = (−0.4199743, 0.4199743),
    //   dv = (P_00 + P_10, P_11) = (1.1192029, 0.8807971).
    Tensor q = Tensor({{1}, {2}}, true), k = Tensor({{0}, {1}}, true), v = Tensor({{3}, {5}}, true);
    Tensor out = F::tiled_causal_attention(q, k, v);
    require_values(out, {{3}, {4.7615942}});
    sum(out).backward();
    require_values(q.grad(), {{0}, {0.2099872}});
    require_values(k.grad(), {{-0.4199743}, {0.4199743}});
    require_values(v.grad(), {{1.1192029}, {0.8807971}});
    // diagonal −1: query i sees keys j ≤ i − 1. Row 0 sees none: out 0, not NaN, and no gradient;
    // row 1 sees key 0 alone: out_1 = v_0 = 3.
    Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
    Tensor out2 = F::tiled_causal_attention(q2, k2, v2, std::nullopt, -1);
    require_values(out2, {{0}, {3}});
    sum(out2).backward();
    require_values(q2.grad(), {{0}, {0}});
    require_values(k2.grad(), {{0}, {0}});
    require_values(v2.grad(), {{1}, {0}});
    // A diagonal below −Tq: no row sees any key; out and every gradient are 0.
    Tensor q3 = q.detach().requires_grad_();
    Tensor out3 = F::tiled_causal_attention(q3, k, v, std::nullopt, -5);
    require_values(out3, {{0}, {0}});
    sum(out3).backward();
    require_values(q3.grad(), {{0}, {0}});
}

TEST_CASE("tiled_causal_attention: a NaN or an inf in a future key and value reaches no earlier row",
          "[nn][attention][tiled]") {
    // k and v at position p = 100 (inside the second tile, so on a tile the diagonal crosses) hold
    // NaN, or inf. Rows 0..99 of out and dq are finite and equal those with 0 there; every value
    // and gradient equals the oracle's, NaN where the oracle's is (rows from p on see the value).
    const std::int64_t T = 150, p = 100;
    manual_seed(7);
    const Tensor q = randn({2, T, 8}), k = randn({2, T, 8}), v = randn({2, T, 8}), G = randn({2, T, 8});
    auto with_position = [&](const Tensor& x, real value) {
        Tensor y = x.detach();
        for (std::int64_t n = 0; n < 2; ++n)
            for (std::int64_t c = 0; c < 8; ++c) y.mutable_data()(n, p, c) = value;
        return y;
    };
    const Case c{{2}, T, T, 8, 8};
    const Run clean = tiled(c, q, with_position(k, 0), with_position(v, 0), G);
    for (real bad : {kNaN, kInf}) {
        INFO("k and v at position " << p << " hold " << bad);
        const Tensor kb = with_position(k, bad), vb = with_position(v, bad);
        const Run a = tiled(c, q, kb, vb, G), b = oracle(c, q, kb, vb, G);
        REQUIRE(all_finite(first_rows(a.out, p)));
        REQUIRE(all_finite(first_rows(a.dq, p)));
        require_values(first_rows(a.out, p), first_rows(clean.out, p));
        require_values(first_rows(a.dq, p), first_rows(clean.dq, p));
        require_values_or_both_nan(a.out, b.out);
        require_values_or_both_nan(a.dq, b.dq);
        require_values_or_both_nan(a.dk, b.dk);
        require_values_or_both_nan(a.dv, b.dv);
    }
}

TEST_CASE("tiled_causal_attention: the same bits on one thread and on two", "[nn][attention][tiled][threads]") {
    // Forward splits (matrix, query block) items, backward matrices; each row's sums keep one order.
    ThreadsGuard guard;
    manual_seed(3);
    const Case c{{1, 3}, 200, 200, 32, 32};
    const Tensor q = randn({1, 3, 200, 32}), k = randn({1, 3, 200, 32}), v = randn({1, 3, 200, 32});
    const Tensor G = randn({1, 3, 200, 32});
    set_pool_threads(1);
    const Run one = tiled(c, q, k, v, G);
    set_pool_threads(2);
    const Run two = tiled(c, q, k, v, G);
    REQUIRE(bits_equal(one.out, two.out));
    REQUIRE(bits_equal(one.dq, two.dq));
    REQUIRE(bits_equal(one.dk, two.dk));
    REQUIRE(bits_equal(one.dv, two.dv));
}

TEST_CASE("tiled_causal_attention: bad shapes throw ValueError naming the op", "[nn][attention][tiled]") {
    using Catch::Matchers::Contains;
    const Tensor q = zeros({2, 3, 4});
    CHECK_THROWS_WITH(F::tiled_causal_attention(q, zeros({2, 3, 5}), zeros({2, 3, 4})),
                      Contains("tiled_causal_attention") && Contains("head width"));
    CHECK_THROWS_WITH(F::tiled_causal_attention(q, q, zeros({2, 2, 4})),
                      Contains("tiled_causal_attention") && Contains("number of keys"));
    CHECK_THROWS_AS(F::tiled_causal_attention(zeros({4}), zeros({4}), zeros({4})), ValueError);
}

TEST_CASE("CausalSelfAttention: the tiled kernel from kTiledFromT on, the fused one below, both the composed",
          "[nn][attention][tiled]") {
    manual_seed(11);
    const auto composed_opts = nn::CausalSelfAttentionOptions().fast_kernels(false);
    nn::CausalSelfAttention fast(/*d=*/8, /*n_head=*/2), composed(8, 2, composed_opts);
    composed.load_state_dict(fast.state_dict());
    for (std::int64_t T : {nn::CausalSelfAttention::kTiledFromT - 1, nn::CausalSelfAttention::kTiledFromT}) {
        INFO("T " << T);
        const Tensor x0 = randn({1, T, 8}), G = randn({1, T, 8});
        Tensor xf = x0.detach().requires_grad_(), xc = x0.detach().requires_grad_();
        Tensor yf = fast.forward(xf), yc = composed.forward(xc);
        const bool long_context = T >= nn::CausalSelfAttention::kTiledFromT;
        REQUIRE(graph_has(yf, "tiled_causal_attention") == long_context);
        REQUIRE(graph_has(yf, "fused_causal_attention_packed") == !long_context);
        require_values(yf, yc, 1e-5);
        weighted_sum(yf, G).backward();
        weighted_sum(yc, G).backward();
        require_values(xf.grad(), xc.grad(), 1e-5);
        require_values(fast.c_attn->weight.grad(), composed.c_attn->weight.grad(), 1e-5);
        fast.zero_grad();
        composed.zero_grad();
    }
}
