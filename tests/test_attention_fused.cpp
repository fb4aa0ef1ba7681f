// tests/test_attention_fused.cpp — the fused attention (nn/attention_fused.cpp) against the
// composed one (nn/attention.cpp), which scaled_dot_product_attention still runs when it is
// given an explicit 0/1 mask: tril(ones) for causal, ones for none. Values and the gradients of
// q, k and v for a G whose entries all differ, on shapes with Tq = Tk, Tq < Tk and Tq > Tk,
// no leading dims and two, head widths that are and are not a multiple of the SIMD width,
// and a given scale. Shapes: q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv).
#include <catch2/catch.hpp>

#include <optional>

#include "nn/attention.hpp"
#include "nn/attention_fused.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
using xgrad::testing::require_values;
namespace F = xgrad::nn::functional;

TEST_CASE("fused attention equals the composed one - values and gradients", "[nn][attention][fused]") {
    struct Case {
        Shape lead;
        std::size_t Tq, Tk, hd, hv;
        bool causal;
        std::optional<double> scale;
    };
    const Case cases[] = {{{2, 3}, 16, 16, 8, 8, true, std::nullopt},  {{2, 3}, 16, 16, 8, 8, false, std::nullopt},
                          {{3}, 5, 9, 3, 6, true, std::nullopt},       {{3}, 9, 5, 4, 2, true, 0.7},
                          {{}, 7, 7, 13, 5, false, std::nullopt},      {{1, 2}, 33, 33, 32, 32, true, std::nullopt}};
    manual_seed(31);
    for (const Case& c : cases) {
        INFO("Tq " << c.Tq << ", Tk " << c.Tk << ", hd " << c.hd << ", hv " << c.hv << ", causal " << c.causal);
        auto with = [&](Shape tail) {
            Shape s = c.lead;
            s.insert(s.end(), tail.begin(), tail.end());
            return s;
        };
        const Tensor q0 = randn(with({c.Tq, c.hd})), k0 = randn(with({c.Tk, c.hd})), v0 = randn(with({c.Tk, c.hv}));
        const Tensor G = randn(with({c.Tq, c.hv}));
        Tensor qf = q0.detach().requires_grad_(), kf = k0.detach().requires_grad_(), vf = v0.detach().requires_grad_();
        Tensor qc = q0.detach().requires_grad_(), kc = k0.detach().requires_grad_(), vc = v0.detach().requires_grad_();
        // The fused path: no mask, no dropout. The composed path: the same mask, spelled out.
        Tensor yf = F::scaled_dot_product_attention(qf, kf, vf, Tensor(), c.causal, 0.0, c.scale);
        const Tensor mask = c.causal ? tril(ones({c.Tq, c.Tk})) : ones({c.Tq, c.Tk});
        Tensor yc = F::scaled_dot_product_attention(qc, kc, vc, mask, false, 0.0, c.scale);
        require_values(yf, yc, 1e-5);
        yf.backward(G);
        yc.backward(G);
        require_values(qf.grad(), qc.grad(), 1e-4);
        require_values(kf.grad(), kc.grad(), 1e-4);
        require_values(vf.grad(), vc.grad(), 1e-5);
    }
}

TEST_CASE("fused attention: causal row 0 is v's first row - and no gradient reaches later keys from it",
          "[nn][attention][fused]") {
    // Query 0 sees key 0 only: weight 1, so out[0] = v[0]; keys 1.. get no gradient from row 0.
    Tensor q = Tensor({{1, 2}, {3, 4}, {5, 6}}, true), k = Tensor({{1, 0}, {0, 1}, {1, 1}}, true);
    Tensor v = Tensor({{7, 8}, {9, 10}, {11, 12}}, true);
    Tensor y = F::attention_fused(q, k, v, /*is_causal=*/true, 1.0f);
    REQUIRE(y.at({0, 0}) == 7.0f);
    REQUIRE(y.at({0, 1}) == 8.0f);
    y.backward(Tensor({{1, 1}, {0, 0}, {0, 0}}));  // only row 0's output matters
    require_values(v.grad(), {{1, 1}, {0, 0}, {0, 0}});
    require_values(k.grad(), {{0, 0}, {0, 0}, {0, 0}});  // a weight of exactly 1 does not move
    require_values(q.grad(), {{0, 0}, {0, 0}, {0, 0}});
}
