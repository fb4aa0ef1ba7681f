// tests/nn/test_attention.cpp — value tests of nn/attention.cpp (the module) and
// nn/attention/composed.cpp (scaled_dot_product_attention), float32.
//
//   * values and gradients against PyTorch 1.13, from tests/reference/attention_reference.json
//     (written by tests/reference/make_attention_reference.py; a fully masked row there is
//     derived by hand, since torch 1.13 gives NaN for it);
//   * causal leakage: changing position t leaves outputs and input gradients before t
//     bit-identical;
//   * fully masked rows give 0 and finite gradients; masks are honoured; hostile shapes throw;
//   * causal_mask is is_causal's keep-mask (hand values; equal sdpa outputs for Tq ≠ Tk);
//   * a NaN in a hidden key or value reaches no row that may not see it, in value or gradient, in
//     every path (composed with is_causal or a mask, fused, every branch of the module), and masks
//     of rank 0 and 1 broadcast as PyTorch's;
//   * an empty sequence or batch gives the empty output in every branch, and in forward_cached.
// Shapes: q, k (B, H, T, hd), v (B, H, Tk, hv); x (B, T, d).
#include <catch2/catch.hpp>

#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/attention/cached.hpp>
#include <xgrad/nn/attention/fused.hpp>
#include <xgrad/nn/attention/tiled.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include "test_helpers.hpp"
#include "reference/reference_json.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;
using nlohmann::json;

namespace {

// {"shape": [...], "data": [...]} → Tensor
Tensor tensor_of(const json& j, bool requires_grad = false) {
    Array a(j.at("shape").get<ArrayShape>());
    const auto& data = j.at("data");
    REQUIRE(data.size() == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(data[i].get<double>());
    return from_array(std::move(a), requires_grad);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: values and gradients match PyTorch") {
    for (const json& c : reference_json("attention_reference.json").at("sdpa")) {
        INFO("case " << c.at("name").get<std::string>());
        Tensor q = tensor_of(c.at("q"), true), k = tensor_of(c.at("k"), true), v = tensor_of(c.at("v"), true);
        const Tensor mask = c.at("mask").is_null() ? Tensor() : tensor_of(c.at("mask"));
        std::optional<double> scale;
        if (!c.at("scale").is_null()) scale = c.at("scale").get<double>();
        Tensor out = F::scaled_dot_product_attention(q, k, v, mask, c.at("is_causal").get<bool>(), 0.0, scale);
        require_values(out, tensor_of(c.at("out")));
        sum(out * tensor_of(c.at("w"))).backward();
        require_values(q.grad(), tensor_of(c.at("dq")));
        require_values(k.grad(), tensor_of(c.at("dk")));
        require_values(v.grad(), tensor_of(c.at("dv")));
    }
}

TEST_CASE("CausalSelfAttention: nanoGPT-layout weights give PyTorch's outputs and gradients") {
    for (const json& c : reference_json("attention_reference.json").at("module")) {
        INFO("case " << c.at("name").get<std::string>());
        nn::CausalSelfAttention m(c.at("d").get<std::int64_t>(), c.at("n_head").get<std::int64_t>(),
                                  nn::CausalSelfAttentionOptions().rope(c.at("rope").get<bool>()));
        NamedTensors state;
        for (const auto& [name, t] : c.at("state").items()) state.emplace_back(name, tensor_of(t));
        m.load_state_dict(state);  // strict: the names and shapes are nanoGPT's
        Tensor x = tensor_of(c.at("x"), true);
        const Tensor mask = c.at("mask").is_null() ? Tensor() : tensor_of(c.at("mask"));
        Tensor y = m.forward(x, mask);
        require_values(y, tensor_of(c.at("y")));
        sum(y * tensor_of(c.at("w"))).backward();
        require_values(x.grad(), tensor_of(c.at("dx")));
        for (const auto& [name, p] : m.named_parameters()) {
            INFO("gradient of " << name);
            require_values(p.grad(), tensor_of(c.at("grads").at(name)));
        }
    }
}

TEST_CASE("CausalSelfAttentionOptions: the setters chain and the getters read them") {
    const auto o = nn::CausalSelfAttentionOptions().dropout(0.25).bias(false).rope(true).fast_kernels(false);
    REQUIRE(o.dropout() == 0.25);
    REQUIRE_FALSE(o.bias());
    REQUIRE(o.rope());
    REQUIRE_FALSE(o.fast_kernels());
    const auto n = nn::CausalSelfAttentionOptions().n_kv_head(2).llama_names(true);
    REQUIRE((n.n_kv_head() == 2 && n.llama_names()));
    const auto d = nn::CausalSelfAttentionOptions().rope(true);  // the others keep their defaults
    REQUIRE((d.dropout() == 0.0 && d.bias() && d.fast_kernels() && d.n_kv_head() == 0 && !d.llama_names()));
    // Without biases the module registers c_attn.weight (3d, d) and c_proj.weight (d, d) only.
    const nn::CausalSelfAttention m(4, 2, nn::CausalSelfAttentionOptions().bias(false));
    REQUIRE(m.named_parameters().size() == 2);
}

TEST_CASE("scaled_dot_product_attention: two keys worked by hand") {
    // q = [[1, 0]], k = [[1, 0], [0, 1]], v = [[1, 2], [3, 4]], hd = 2:
    // scores = [1, 0] / √2, weights = softmax = [e^(1/√2), 1] / (e^(1/√2) + 1) = [0.66976, 0.33024]
    // out = 0.66976·[1, 2] + 0.33024·[3, 4] = [1.66048, 2.66048]
    const double w0 = std::exp(1 / std::sqrt(2.0)) / (std::exp(1 / std::sqrt(2.0)) + 1);
    Tensor out = F::scaled_dot_product_attention(Tensor({{1, 0}}), Tensor({{1, 0}, {0, 1}}), Tensor({{1, 2}, {3, 4}}));
    require_values(out, Tensor({{real(w0 * 1 + (1 - w0) * 3), real(w0 * 2 + (1 - w0) * 4)}}));
    REQUIRE(w0 == Approx(0.66976).epsilon(1e-4));
    // causal: query 0 sees key 0 only, so out = v[0]
    require_values(F::scaled_dot_product_attention(Tensor({{1, 0}}), Tensor({{1, 0}, {0, 1}}),
                                                   Tensor({{1, 2}, {3, 4}}), Tensor(), true),
                   Tensor({{1, 2}}));
}

TEST_CASE("causal_mask: the keep-mask of is_causal, top-left aligned as PyTorch's") {
    // PyTorch's sdpa reference code: temp_mask = ones(L, S, dtype=bool).tril(diagonal=0), 1 = attend.
    require_values(F::causal_mask(3, 3), Tensor({{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}), 0);
    require_values(F::causal_mask(2, 4), Tensor({{1, 0, 0, 0}, {1, 1, 0, 0}}), 0);
    require_values(F::causal_mask(4, 2), Tensor({{1, 0}, {1, 1}, {1, 1}, {1, 1}}), 0);
    REQUIRE(F::causal_mask(0, 3).shape() == Shape{0, 3});
    REQUIRE(!F::causal_mask(2, 2).requires_grad());
    REQUIRE_THROWS_AS(F::causal_mask(-1, 3), ValueError);
    // masked_fill's convention is the opposite: it fills where its mask is 1, the future.
    require_values(eq(F::causal_mask(3, 3), 0), triu(ones({3, 3}), 1), 0);
}

TEST_CASE("causal_mask: sdpa(attn_mask = causal_mask(Tq, Tk)) equals sdpa(is_causal = true)") {
    manual_seed(21);
    for (auto [Tq, Tk] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {3, 5}, {5, 3}}) {
        INFO("Tq " << Tq << " Tk " << Tk);
        const Tensor q = randn({2, 2, Tq, 4}), k = randn({2, 2, Tk, 4}), v = randn({2, 2, Tk, 3});
        const Tensor by_mask = F::scaled_dot_product_attention(q, k, v, F::causal_mask(Tq, Tk));
        REQUIRE(bits_equal(by_mask, F::scaled_dot_product_attention(q, k, v, Tensor(), /*is_causal=*/true)));
        // and it differs from the unmasked attention, so the comparison can fail
        REQUIRE(!bits_equal(by_mask, F::scaled_dot_product_attention(q, k, v)));
    }
}

TEST_CASE("scaled_dot_product_attention: a fully masked row gives 0 and finite gradients") {
    manual_seed(11);
    Tensor q = randn({2, 3, 4}, true), k = randn({2, 3, 4}, true), v = randn({2, 3, 4}, true);
    Tensor mask({{1, 1, 0}, {0, 0, 0}, {1, 0, 1}});  // query 1 may attend no key
    Tensor out = F::scaled_dot_product_attention(q, k, v, mask);
    sum(out * out).backward();
    for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t j = 0; j < 4; ++j) {
            REQUIRE(out.at({b, 1, j}) == 0);
            REQUIRE(q.grad().at({b, 1, j}) == 0);
        }
    for (const Tensor& t : {out, q.grad(), k.grad(), v.grad()})
        for (real e : t.data()) REQUIRE(std::isfinite(e));
    // the weights of that row are 0, and the other rows still sum to 1
    Tensor w = F::attention_weights(q, k, mask);
    for (std::size_t b = 0; b < 2; ++b) {
        for (std::size_t j = 0; j < 3; ++j) REQUIRE(w.data()(b, 1, j) == 0);
        REQUIRE(double(w.data()(b, 0, 0) + w.data()(b, 0, 1)) == Approx(1));
        REQUIRE(w.data()(b, 0, 2) == 0);
    }
}

TEST_CASE("scaled_dot_product_attention: causal leakage is zero, bit for bit") {
    // Change position t of q, k and v. Outputs before t, and the gradients of a loss on those
    // outputs with respect to the inputs before t, must not change in a single bit; the
    // gradients at t and after must be exactly 0.
    const std::size_t T = 6, t = 3;
    manual_seed(12);
    const Tensor q0 = randn({2, 2, T, 4}), k0 = randn({2, 2, T, 4}), v0 = randn({2, 2, T, 4});
    const Tensor noise = randn({2, 2, 1, 4}) * 5;
    auto run = [&](bool perturb) {
        Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
        if (perturb)
            for (Tensor* x : {&q, &k, &v}) xt::view(x->mutable_data(), xt::all(), xt::all(), t, xt::all()) += xt::view(noise.data(), xt::all(), xt::all(), 0, xt::all());
        for (Tensor* x : {&q, &k, &v}) x->requires_grad_();
        Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), true);
        Tensor before = narrow(out, 2, 0, std::int64_t(t));  // (B, H, t, hd)
        sum(before * before).backward();
        return std::vector<Tensor>{before, q.grad(), k.grad(), v.grad()};
    };
    const auto a = run(false), b = run(true);
    REQUIRE(bits_equal(a[0], b[0]));
    for (std::size_t i = 1; i < 4; ++i) {
        REQUIRE(bits_equal(narrow(a[i], 2, 0, std::int64_t(t)), narrow(b[i], 2, 0, std::int64_t(t))));
        // Hold the narrowed tensor: a range-for over .data() of a temporary would read freed memory.
        const Tensor after = narrow(b[i], 2, std::int64_t(t), std::int64_t(T - t));
        for (real g : after.data()) REQUIRE(g == 0);
    }
}

TEST_CASE("CausalSelfAttention: causal leakage is zero, bit for bit") {
    const std::int64_t T = 5, t = 2;
    manual_seed(13);
    nn::CausalSelfAttention m(/*d=*/8, /*n_head=*/2);
    const Tensor x0 = randn({2, std::size_t(T), 8});
    auto run = [&](bool perturb) {
        Tensor x = x0.detach();
        if (perturb) xt::view(x.mutable_data(), xt::all(), t, xt::all()) += 3;
        x.requires_grad_();
        Tensor y = m.forward(x);
        Tensor before = narrow(y, 1, 0, t);  // (B, t, d)
        sum(before * before).backward();
        return std::tuple<Tensor, Tensor, Tensor>{y, before, x.grad()};
    };
    const auto [all_a, y_a, g_a] = run(false);
    const auto [all_b, y_b, g_b] = run(true);
    REQUIRE(!bits_equal(narrow(all_a, 1, t, 1), narrow(all_b, 1, t, 1)));  // position t did change
    REQUIRE(bits_equal(y_a, y_b));
    REQUIRE(bits_equal(narrow(g_a, 1, 0, t), narrow(g_b, 1, 0, t)));
    const Tensor after = narrow(g_b, 1, t, T - t);  // held: .data() of a temporary would dangle
    for (real g : after.data()) REQUIRE(g == 0);
}

TEST_CASE("CausalSelfAttention: attn_mask is honoured") {
    // A key-padding mask that keeps keys 0..2 of 5 must give, at positions 0..2, exactly what
    // the module gives on the first 3 tokens alone; without the mask positions 3, 4 differ.
    manual_seed(14);
    nn::CausalSelfAttention m(/*d=*/8, /*n_head=*/2);
    const Tensor x = randn({1, 5, 8});
    const Tensor keep = Tensor({1, 1, 1, 0, 0}).reshape({1, 1, 1, 5});  // (B, 1, 1, T)
    const Tensor masked = m.forward(x, keep), unmasked = m.forward(x);
    const Tensor short_run = m.forward(narrow(x, 1, 0, 3));
    require_values(narrow(masked, 1, 0, 3), short_run);
    // positions 3 and 4 now attend keys 0..2 only, so they differ from the unmasked output
    const Tensor diff = narrow(masked, 1, 3, 2) - narrow(unmasked, 1, 3, 2);
    REQUIRE(xt::amax(xt::abs(diff.data()))() > 1e-3);
    // and the weights agree: (B, H, T, T) with keys 3, 4 at 0 in every row
    const Tensor w = m.attention_weights(x, keep);
    REQUIRE(w.shape() == Shape{1, 2, 5, 5});
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < 5; ++i) {
            REQUIRE(w.at({0, h, i, 3}) == 0);
            REQUIRE(w.at({0, h, i, 4}) == 0);
        }
}

TEST_CASE("CausalSelfAttention: attention_weights are causal rows that sum to 1 and record no graph") {
    manual_seed(15);
    nn::CausalSelfAttention m(/*d=*/6, /*n_head=*/3);
    const Tensor x = randn({2, 4, 6}, true);
    const Tensor w = m.attention_weights(x);
    REQUIRE(w.shape() == Shape{2, 3, 4, 4});
    REQUIRE(!w.requires_grad());
    require_values(sum(w, -1), ones({2, 3, 4}));
    for (std::int64_t i = 0; i < 4; ++i)
        for (std::int64_t j = i + 1; j < 4; ++j) REQUIRE(w.at({1, 2, i, j}) == 0);
    REQUIRE(m.num_parameters() == 6 * 18 + 18 + 6 * 6 + 6);
}

TEST_CASE("scaled_dot_product_attention: dropout on the weights") {
    // v = identity (Tk, Tk) makes out equal the weights after dropout: each is 0 or w / (1 - p).
    manual_seed(16);
    const Tensor q = randn({1, 8, 4}), k = randn({1, 8, 4});
    Array eye = xt::eye<real>(8);
    eye.reshape({1, 8, 8});
    const Tensor v = from_array(std::move(eye));
    const Tensor w = F::attention_weights(q, k);
    const Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), false, /*dropout_p=*/0.25);
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < w.numel(); ++i) {
        const double o = out.data().data()[i], expected = w.data().data()[i] / 0.75;
        REQUIRE((o == 0 || o == Approx(expected).epsilon(1e-6)));
        kept += o != 0;
    }
    REQUIRE(kept > 0);
    REQUIRE(kept < w.numel());
    const Tensor none = F::scaled_dot_product_attention(q, k, v, Tensor(), false, /*dropout_p=*/1.0);
    for (real o : none.data()) REQUIRE(o == 0);
}

TEST_CASE("CausalSelfAttention: dropout is off in eval mode") {
    manual_seed(17);
    nn::CausalSelfAttention m(/*d=*/4, /*n_head=*/2, nn::CausalSelfAttentionOptions().dropout(0.5));
    const Tensor x = randn({1, 3, 4});
    m.eval();
    REQUIRE(bits_equal(m.forward(x), m.forward(x)));
    m.train();
    REQUIRE(!bits_equal(m.forward(x), m.forward(x)));
}

TEST_CASE("scaled_dot_product_attention: hostile shapes and masks throw ValueError") {
    const Tensor q = zeros({2, 2, 3, 4}), k = zeros({2, 2, 3, 4}), v = zeros({2, 2, 3, 4});
    auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m = Tensor(), bool causal = false,
                   double p = 0.0) { return F::scaled_dot_product_attention(a, b, c, m, causal, p); };
    REQUIRE_THROWS_AS(sdpa(zeros({4}), zeros({4}), zeros({4})), ValueError);                  // 1-D
    REQUIRE_THROWS_AS(sdpa(q, zeros({2, 2, 3, 5}), v), ValueError);                         // hd 4 vs 5
    REQUIRE_THROWS_AS(sdpa(q, k, zeros({2, 2, 2, 4})), ValueError);                         // Tk 3 vs 2
    REQUIRE_THROWS_AS(sdpa(q, zeros({2, 3, 3, 4}), zeros({2, 3, 3, 4})), ValueError);       // H 2 vs 3
    REQUIRE_THROWS_AS(sdpa(q, zeros({2, 3, 4}), zeros({2, 3, 4})), ValueError);             // ranks differ
    REQUIRE_THROWS_AS(sdpa(zeros({2, 3, 0}), zeros({2, 3, 0}), v), ValueError);             // hd 0
    REQUIRE_THROWS_AS(sdpa(zeros({3, 4}), zeros({0, 4}), zeros({0, 4})), ValueError);       // no keys
    REQUIRE_THROWS_AS(sdpa(q, k, v, ones({3, 4})), ValueError);                             // mask (Tq, Tk+1)
    REQUIRE_THROWS_AS(sdpa(q, k, v, ones({3, 2, 3, 3})), ValueError);                       // mask B 3 vs 2
    REQUIRE_THROWS_AS(sdpa(q, k, v, ones({1, 2, 2, 3, 3})), ValueError);                    // mask rank 5
    REQUIRE_THROWS_AS(sdpa(q, k, v, full({3, 3}, 0.5)), ValueError);                        // not 0/1
    REQUIRE_THROWS_AS(sdpa(q, k, v, full({3, 3}, -std::numeric_limits<real>::infinity())), ValueError);  // additive
    REQUIRE_THROWS_AS(sdpa(q, k, v, ones({3, 3}), true), ValueError);                       // mask and causal
    REQUIRE_THROWS_AS(sdpa(q, k, v, Tensor(), false, 1.5), ValueError);                     // dropout_p
    REQUIRE_THROWS_AS(sdpa(q, k, v, Tensor(), false, -0.1), ValueError);
    REQUIRE_THROWS_AS(sdpa(q, Tensor(), v), ValueError);                                    // undefined
    try {
        sdpa(q, k, v, ones({3, 4}));
        FAIL("no exception");
    } catch (const ValueError& e) {
        REQUIRE(std::string(e.what()) ==
                "scaled_dot_product_attention: attn_mask of shape (3, 4) does not broadcast to (..., Tq, Tk) = "
                "(2, 2, 3, 3)");
    }
}

TEST_CASE("attention: every kernel refuses a scale that is NaN or infinite, naming it", "[attention]") {
    // A non-finite scale makes every score NaN (or inf − inf): refused as bad input, in each
    // kernel's name. 0 and negative scales are numbers and are taken.
    const Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 3, 4}), v = randn({1, 2, 3, 4});
    nn::KVCache cache(4);
    cache.append(k.data(), v.data());
    for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
        INFO("scale " << bad);
        REQUIRE_THROWS_WITH(F::scaled_dot_product_attention(q, k, v, Tensor(), true, 0.0, bad),
                            Catch::Contains("scaled_dot_product_attention") && Catch::Contains("scale"));
        REQUIRE_THROWS_WITH(F::fused_causal_attention(q, k, v, bad),
                            Catch::Contains("fused_causal_attention") && Catch::Contains("scale"));
        REQUIRE_THROWS_WITH(F::tiled_causal_attention(q, k, v, bad),
                            Catch::Contains("tiled_causal_attention") && Catch::Contains("scale"));
        REQUIRE_THROWS_WITH(F::cached_causal_attention(q, cache, bad),
                            Catch::Contains("cached_causal_attention") && Catch::Contains("scale"));
    }
    CHECK(allclose(F::fused_causal_attention(q, k, v, 0.0), F::scaled_dot_product_attention(q, k, v, Tensor(), true, 0.0, 0.0)));
    CHECK(allclose(F::tiled_causal_attention(q, k, v, -0.5), F::scaled_dot_product_attention(q, k, v, Tensor(), true, 0.0, -0.5)));
}

TEST_CASE("CausalSelfAttention: bad sizes throw ValueError") {
    REQUIRE_THROWS_AS(nn::CausalSelfAttention(6, 4), ValueError);   // 6 not a multiple of 4
    REQUIRE_THROWS_AS(nn::CausalSelfAttention(0, 1), ValueError);
    REQUIRE_THROWS_AS(nn::CausalSelfAttention(4, 0), ValueError);
    REQUIRE_THROWS_AS(nn::CausalSelfAttention(6, 2, nn::CausalSelfAttentionOptions().rope(true)), ValueError);  // hd 3 is odd
    REQUIRE_THROWS_AS(nn::CausalSelfAttention(4, 2, nn::CausalSelfAttentionOptions().dropout(1.0)), ValueError);
    nn::CausalSelfAttention m(4, 2);
    REQUIRE_THROWS_AS(m.forward(zeros({3, 4})), ValueError);        // (T, d): no batch dim
    REQUIRE_THROWS_AS(m.forward(zeros({1, 3, 5})), ValueError);     // d 5 vs 4
    REQUIRE_THROWS_AS(m.forward(zeros({1, 3, 4}), ones({1, 1, 1, 4})), ValueError);  // mask T 4 vs 3
    REQUIRE_THROWS_AS(m.forward(zeros({1, 3, 4}), ones({1, 3, 3, 3})), ValueError);  // mask H 3 vs 2
    REQUIRE_THROWS_AS(m.attention_weights(zeros({1, 3, 4}), full({3, 3}, 2)), ValueError);
}

// ---- hidden non-finite keys and values ---------------------------------------------------------

namespace {

// The causal paths of the functional API, each a function of (q, k, v).
struct CausalPath {
    const char* name;
    Tensor (*run)(const Tensor&, const Tensor&, const Tensor&);
};
const CausalPath kCausalPaths[] = {
    {"sdpa is_causal", [](const Tensor& q, const Tensor& k, const Tensor& v) {
         return F::scaled_dot_product_attention(q, k, v, Tensor(), /*is_causal=*/true);
     }},
    {"sdpa causal_mask", [](const Tensor& q, const Tensor& k, const Tensor& v) {
         return F::scaled_dot_product_attention(q, k, v, F::causal_mask(q.size(-2), k.size(-2)));
     }},
    {"fused_causal_attention", [](const Tensor& q, const Tensor& k, const Tensor& v) {
         return F::fused_causal_attention(q, k, v);
     }},
};

// Position `t` (on dim -2) of x set to `value`.
Tensor with_row(const Tensor& x, std::int64_t t, real value) {
    Tensor y = x.detach();
    xt::view(y.mutable_data(), xt::all(), t, xt::all()) = value;
    return y;
}

// out and the gradients of sum(out · G) for q, k, v (copies of the given values).
struct CausalRun {
    Tensor out, dq, dk, dv;
};
CausalRun run_path(const CausalPath& p, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& G) {
    Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
    Tensor out = p.run(q, k, v);
    sum(out * G).backward();
    return {out, q.grad(), k.grad(), v.grad()};
}

// rows [r0, r0 + n) of x (T, C) on dim -2
Tensor rows(const Tensor& x, std::int64_t r0, std::int64_t n) { return narrow(x, -2, r0, n); }

bool all_nan(const Tensor& t) {
    for (real e : t.data())
        if (!std::isnan(e)) return false;
    return true;
}

// Run a has a NaN in key or value 2, run b a 0 there. Queries 0 and 1 may not see position 2:
// their outputs and dq rows are finite and equal b's; query 2 sees it, and its output is NaN.
void require_rows_0_1_unaffected(const CausalRun& a, const CausalRun& b) {
    REQUIRE(all_finite(rows(a.out, 0, 2)));
    require_values(rows(a.out, 0, 2), rows(b.out, 0, 2));
    REQUIRE(all_nan(rows(a.out, 2, 1)));
    REQUIRE(all_finite(rows(a.dq, 0, 2)));
    require_values(rows(a.dq, 0, 2), rows(b.dq, 0, 2));
}

}  // namespace

TEST_CASE("attention: a NaN in the last value leaves earlier rows finite, in every causal path",
          "[attention][regression]") {
    // q, k, v (2, 3, 4), v[:, 2] = NaN. Rows 0 and 1 may not see key 2: their outputs and the
    // gradients of q at rows 0, 1 equal those with v[:, 2] = 0. Row 2 sees it and is NaN, as
    // PyTorch's; so are dk[0..2], because out[2] (in the loss) depends on every key it sees.
    // The weights do not depend on v, so dv = Σ_i P[i, j] · G[i] is finite everywhere.
    manual_seed(41);
    const Tensor q = randn({2, 3, 4}), k = randn({2, 3, 4}), v = randn({2, 3, 4}), G = randn({2, 3, 4});
    const Tensor v_nan = with_row(v, 2, kNaN), v_zero = with_row(v, 2, 0);
    for (const CausalPath& p : kCausalPaths) {
        INFO(p.name);
        const CausalRun a = run_path(p, q, k, v_nan, G), b = run_path(p, q, k, v_zero, G);
        require_rows_0_1_unaffected(a, b);
        require_values(a.dv, b.dv);
        REQUIRE(all_nan(a.dk));
    }
}

TEST_CASE("attention: a NaN in the last key leaves earlier rows finite, in every causal path",
          "[attention][regression]") {
    // k[:, 2] = NaN: query 2's scores are NaN, so out[2] and P[2, :] are NaN; rows 0 and 1 and
    // dq[0..1] equal those with k[:, 2] = 0.
    manual_seed(42);
    const Tensor q = randn({2, 3, 4}), k = randn({2, 3, 4}), v = randn({2, 3, 4}), G = randn({2, 3, 4});
    const Tensor k_nan = with_row(k, 2, kNaN), k_zero = with_row(k, 2, 0);
    for (const CausalPath& p : kCausalPaths) {
        INFO(p.name);
        const CausalRun a = run_path(p, q, k_nan, v, G), b = run_path(p, q, k_zero, v, G);
        require_rows_0_1_unaffected(a, b);
    }
    // attention_weights: rows 0 and 1 and their gradient of q do not read key 2 either (the loss
    // reads rows 0 and 1 only)
    Tensor qa = q.detach().requires_grad_(), ka = k_nan.detach().requires_grad_();
    Tensor w = F::attention_weights(qa, ka, Tensor(), /*is_causal=*/true);
    Tensor qb = q.detach().requires_grad_(), kb = k_zero.detach().requires_grad_();
    Tensor wb = F::attention_weights(qb, kb, Tensor(), /*is_causal=*/true);
    require_values(rows(w, 0, 2), rows(wb, 0, 2));
    const Tensor Gw = randn({2, 3, 3});
    sum(rows(w, 0, 2) * rows(Gw, 0, 2)).backward();
    sum(rows(wb, 0, 2) * rows(Gw, 0, 2)).backward();
    // Row 2's weights are NaN; its zero gradient times them is NaN (as PyTorch's), and reaches
    // dq[2] and, through dS[2, j] · q[2], every dk[j] that query 2 sees. Rows 0, 1 of dq do not.
    REQUIRE(all_finite(rows(qa.grad(), 0, 2)));
    require_values(rows(qa.grad(), 0, 2), rows(qb.grad(), 0, 2));
}

TEST_CASE("attention: a NaN key and value that no query may see touch no output and no gradient",
          "[attention][regression]") {
    // Tq 2 < Tk 3, causal (top-left): key 2 is in every query's future. With k[:, 2] and
    // v[:, 2] = NaN everything is finite and equals the run with them 0; dk[2] = dv[2] = 0.
    manual_seed(43);
    const Tensor q = randn({2, 2, 4}), k = randn({2, 3, 4}), v = randn({2, 3, 5}), G = randn({2, 2, 5});
    for (const CausalPath& p : kCausalPaths) {
        INFO(p.name);
        const CausalRun a = run_path(p, q, with_row(k, 2, kNaN), with_row(v, 2, kNaN), G);
        const CausalRun b = run_path(p, q, with_row(k, 2, 0), with_row(v, 2, 0), G);
        for (const auto& [got, want] : {std::pair{a.out, b.out}, {a.dq, b.dq}, {a.dk, b.dk}, {a.dv, b.dv}}) {
            REQUIRE(all_finite(got));
            require_values(got, want);
        }
        const Tensor dk2 = rows(a.dk, 2, 1), dv2 = rows(a.dv, 2, 1);  // kept: data() refers into them
        for (real g : dk2.data()) REQUIRE(g == 0);
        for (real g : dv2.data()) REQUIRE(g == 0);
    }
}

TEST_CASE("attention: a fully masked row with a NaN in a masked value gives 0 and zero gradient",
          "[attention][regression]") {
    // Query 1 may attend nothing; key 2 is masked for every query and holds NaN in k and v.
    manual_seed(44);
    const Tensor q = randn({2, 3, 4}), k = randn({2, 3, 4}), v = randn({2, 3, 4}), G = randn({2, 3, 4});
    const Tensor mask({{1, 1, 0}, {0, 0, 0}, {1, 0, 0}});
    auto run = [&](real hidden) {
        Tensor qq = q.detach().requires_grad_(), kk = with_row(k, 2, hidden).requires_grad_();
        Tensor vv = with_row(v, 2, hidden).requires_grad_();
        Tensor out = F::scaled_dot_product_attention(qq, kk, vv, mask);
        sum(out * G).backward();
        return CausalRun{out, qq.grad(), kk.grad(), vv.grad()};
    };
    const CausalRun a = run(kNaN), b = run(0);
    for (const auto& [got, want] : {std::pair{a.out, b.out}, {a.dq, b.dq}, {a.dk, b.dk}, {a.dv, b.dv}}) {
        REQUIRE(all_finite(got));
        require_values(got, want);
    }
    for (const Tensor& t : {rows(a.out, 1, 1), rows(a.dq, 1, 1), rows(a.dk, 2, 1), rows(a.dv, 2, 1)})
        for (real e : t.data()) REQUIRE(e == 0);
}

TEST_CASE("scaled_dot_product_attention: 0-d and 1-element masks broadcast as PyTorch's",
          "[attention][regression]") {
    // The two-key example above: out = [1.66048, 2.66048] when both keys are kept.
    const Tensor q({{1, 0}}), k({{1, 0}, {0, 1}}), v({{1, 2}, {3, 4}});
    const double w0 = std::exp(1 / std::sqrt(2.0)) / (std::exp(1 / std::sqrt(2.0)) + 1);
    const Tensor both({{real(w0 * 1 + (1 - w0) * 3), real(w0 * 2 + (1 - w0) * 4)}});
    for (const Tensor& keep_all : {full({}, 1), Tensor({1}), Tensor({{1}}), Tensor({1, 1})}) {
        INFO("mask shape " << shape_str(keep_all.shape()));
        require_values(F::scaled_dot_product_attention(q, k, v, keep_all), both);
    }
    // a 0-d 0 masks every key: the row is 0; a 1-D (Tk,) mask {1, 0} keeps key 0 only: out = v[0]
    require_values(F::scaled_dot_product_attention(q, k, v, full({}, 0)), Tensor({{0, 0}}), 0);
    require_values(F::scaled_dot_product_attention(q, k, v, Tensor({1, 0})), Tensor({{1, 2}}));
    require_values(F::attention_weights(q, k, Tensor({0, 1})), Tensor({{0, 1}}));
    // the module ANDs a 0-d 1 with causality: the same as no mask
    manual_seed(45);
    nn::CausalSelfAttention m(4, 2);
    const Tensor x = randn({2, 3, 4});
    require_values(m.forward(x, full({}, 1)), m.forward(x));
    require_values(m.attention_weights(x, Tensor({1})), m.attention_weights(x));
}

namespace {

// The branches of CausalSelfAttention::forward: fused kernel, attn_mask, dropout, fast_kernels off.
struct Branch {
    const char* name;
    nn::CausalSelfAttentionOptions options;
    bool with_mask;
};
const Branch kBranches[] = {
    {"fused", nn::CausalSelfAttentionOptions(), false},
    {"attn_mask", nn::CausalSelfAttentionOptions(), true},
    {"dropout", nn::CausalSelfAttentionOptions().dropout(0.3), false},
    {"fast_kernels off", nn::CausalSelfAttentionOptions().fast_kernels(false), false},
};

}  // namespace

TEST_CASE("CausalSelfAttention: a NaN at the last position leaves earlier outputs finite, in every branch",
          "[attention][regression]") {
    // x (2, 3, 4) with x[:, 2] = NaN, so q, k and v at position 2 are NaN. y at positions 0, 1
    // equals the run with x[:, 2] = 0; y at position 2 is NaN. Dropout draws the same masks in
    // both runs (same seed), and only the first two positions are compared.
    for (const Branch& br : kBranches) {
        INFO(br.name);
        manual_seed(46);
        nn::CausalSelfAttention m(4, 2, br.options);
        const Tensor x = randn({2, 3, 4}), mask = br.with_mask ? ones({1, 1, 1, 3}) : Tensor();
        auto run = [&](real value) {
            manual_seed(7);
            return m.forward(with_row(x, 2, value), mask);
        };
        const Tensor a = run(kNaN), b = run(0);
        REQUIRE(all_finite(narrow(a, 1, 0, 2)));
        require_values(narrow(a, 1, 0, 2), narrow(b, 1, 0, 2));
        REQUIRE(all_nan(narrow(a, 1, 2, 1)));
    }
}

TEST_CASE("CausalSelfAttention: a padded position holding NaN touches no output and no input gradient",
          "[attention][regression]") {
    // keep (1, 1, 3, 3) = pad ⊗ pad with pad = [1, 1, 0]: position 2 attends nothing and is
    // attended by no one. With x[:, 2] = NaN, y and dL/dx are finite and equal the run with
    // x[:, 2] = 0, and dL/dx[:, 2] = 0. (c_attn's weight gradient Σ_t dqkv[t]ᵀ x[t] multiplies the
    // zero gradient of position 2 by its NaN input, as PyTorch's Linear does.)
    const Tensor pad = Tensor({1, 1, 0});
    const Tensor keep = (pad.reshape({3, 1}) * pad.reshape({1, 3})).reshape({1, 1, 3, 3});
    for (const Branch& br : kBranches) {
        INFO(br.name);
        manual_seed(47);
        nn::CausalSelfAttention m(4, 2, br.options);
        const Tensor x = randn({2, 3, 4}), G = randn({2, 3, 4});
        auto run = [&](real value) {
            manual_seed(8);
            Tensor xx = with_row(x, 2, value).requires_grad_();
            Tensor y = m.forward(xx, keep);
            sum(y * G).backward();
            return std::pair<Tensor, Tensor>{y, xx.grad()};
        };
        const auto [ya, ga] = run(kNaN);
        const auto [yb, gb] = run(0);
        for (const auto& [got, want] : {std::pair{ya, yb}, {ga, gb}}) {
            REQUIRE(all_finite(got));
            require_values(got, want);
        }
        const Tensor padded = narrow(ga, 1, 2, 1);  // kept: data() refers into it
        for (real g : padded.data()) REQUIRE(g == 0);
    }
}

TEST_CASE("CausalSelfAttention: causal leakage is zero, bit for bit, in every branch", "[attention]") {
    // As the test above for the default branch: a change at position t leaves the outputs before
    // t and the input gradients of a loss on them bit-identical.
    const std::int64_t T = 4, t = 2;
    for (const Branch& br : kBranches) {
        INFO(br.name);
        manual_seed(48);
        nn::CausalSelfAttention m(4, 2, br.options);
        const Tensor x0 = randn({2, std::size_t(T), 4}), mask = br.with_mask ? ones({1, 1, 1, T}) : Tensor();
        auto run = [&](bool perturb) {
            Tensor x = x0.detach();
            if (perturb) xt::view(x.mutable_data(), xt::all(), t, xt::all()) += 3;
            x.requires_grad_();
            manual_seed(9);
            Tensor before = narrow(m.forward(x, mask), 1, 0, t);
            sum(before * before).backward();
            return std::pair<Tensor, Tensor>{before, x.grad()};
        };
        const auto [ya, ga] = run(false);
        const auto [yb, gb] = run(true);
        REQUIRE(bits_equal(ya, yb));
        REQUIRE(bits_equal(narrow(ga, 1, 0, t), narrow(gb, 1, 0, t)));
    }
}

// An empty sequence (B, 0, d) or an empty batch (0, T, d) gives the empty output (B, T, d), as
// PyTorch's modules, in every branch (the fused kernel included) and for the other layouts;
// backward gives x a gradient of x's shape and every parameter a zero one.
TEST_CASE("CausalSelfAttention: an empty sequence or batch gives the empty output, in every branch",
          "[attention][empty][regression]") {
    std::vector<Branch> branches(std::begin(kBranches), std::end(kBranches));
    branches.push_back({"rope, one K/V head, LLaMA names",
                        nn::CausalSelfAttentionOptions().rope(true).n_kv_head(1).llama_names(true), false});
    for (const Branch& br : branches) {
        for (const Shape& shape : {Shape{2, 0, 4}, Shape{0, 3, 4}}) {
            INFO(br.name << ", x " << shape_str(shape));
            manual_seed(49);
            nn::CausalSelfAttention m(4, 2, br.options);
            const Tensor mask = br.with_mask ? ones({1, 1, shape[1], shape[1]}) : Tensor();
            Tensor x = zeros(shape, true);
            const Tensor y = m.forward(x, mask);
            REQUIRE(y.shape() == shape);
            y.sum().backward();
            REQUIRE(x.grad().shape() == shape);
            for (const Tensor& p : m.parameters()) {
                REQUIRE(p.grad().shape() == p.shape());
                for (real g : p.grad().data()) REQUIRE(g == 0);
            }
        }
    }
}

TEST_CASE("CausalSelfAttention: forward_cached on no new positions gives (B, 0, d) and leaves the cache",
          "[attention][kv_cache][empty][regression]") {
    manual_seed(50);
    nn::CausalSelfAttention m(4, 2);
    nn::KVCache cache(5);
    REQUIRE(m.forward_cached(zeros({2, 0, 4}), cache).shape() == Shape{2, 0, 4});
    REQUIRE((cache.length() == 0 && cache.bytes() == 0));  // nothing appended, nothing allocated
    const Tensor x = randn({2, 3, 4});
    const Tensor y = m.forward_cached(x, cache);
    REQUIRE(m.forward_cached(zeros({2, 0, 4}), cache).shape() == Shape{2, 0, 4});
    REQUIRE(cache.length() == 3);
    require_values(y, m.forward(x));
}

TEST_CASE("CausalSelfAttention: forward_cached on an empty batch is refused in the module's words",
          "[attention][kv_cache][empty][regression]") {
    nn::CausalSelfAttention m(4, 2);
    nn::KVCache cache(5);
    CHECK_THAT(message_of<ValueError>([&] { m.forward_cached(zeros({0, 1, 4}), cache); }),
               Catch::Contains("CausalSelfAttention::forward_cached") && Catch::Contains("(0, 1, 4)") &&
                   Catch::Contains("B >= 1"));
    REQUIRE((cache.length() == 0 && cache.bytes() == 0));
}
