// tests/test_optim.cpp — optim/: SGD, Adam, AdamW, lazy sparse updates, state dicts, the
// memory report, clip_grad_norm_, CosineWithWarmup (float32 build).
//
// Every update is checked against the PyTorch-documented formula, recomputed here in double
// with plain scalars (RefSGD, RefAdam below) over several steps, bias correction included.
// Sparse gradients are made by hand (a SparseGrad on the parameter), as nn::Embedding(sparse=
// true) makes them.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "core/autograd.hpp"
#include "core/ops.hpp"
#include "optim/optim.hpp"

using namespace xgrad;

static_assert(sizeof(real) == 4, "the byte counts below are for the float32 build");

namespace {

// ---- inputs -----------------------------------------------------------------------------------
// A gradient value for flat element i at step t: mixed signs and magnitudes, different each step.
real grad_value(int t, std::size_t i) {
    return static_cast<real>(std::sin(0.9 * static_cast<double>(i) + 1.7 * t) + 0.05 * (i % 3));
}

Array make_array(const Shape& shape, const std::function<real(std::size_t)>& f) {
    Array a = xt::zeros<real>(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = f(i);
    return a;
}

Array grad_at(int t, const Shape& shape) {
    return make_array(shape, [t](std::size_t i) { return grad_value(t, i); });
}

// A leaf parameter with deterministic values in about [-1, 1].
Tensor make_param(const Shape& shape, double phase = 0.0) {
    return from_array(make_array(shape, [phase](std::size_t i) {
                          return static_cast<real>(std::cos(0.37 * static_cast<double>(i) + phase));
                      }),
                      true);
}

Tensor clone_param(const Tensor& p) { return from_array(p.data(), true); }  // copies

// Same shape and exactly equal values, element by element (Catch2 cannot decompose xtensor's ==).
bool exactly_equal(const Array& a, const Array& b) { return a == b; }

std::vector<double> to_double(const Array& a) { return std::vector<double>(a.begin(), a.end()); }

// The row-sparse gradient of rows `rows` (n, d) at `ids` (n,), coalesced, replacing any gradient.
void set_sparse_grad(Tensor& p, const std::vector<std::int64_t>& ids, const Array& rows) {
    p.reset_grad();
    auto sg = std::make_unique<SparseGrad>();
    sg->dense_shape = p.shape();
    sg->values = Array(Shape{0, p.shape()[1]});
    if (!ids.empty()) sg->accumulate(ids, rows);
    p.impl()->sparse_grad = std::move(sg);
}

// Rows `ids` of grad_at(t, (V, d)), as the (n, d) values of a sparse gradient.
Array rows_of(const Array& dense, const std::vector<std::int64_t>& ids) {
    const std::size_t d = dense.shape()[1];
    Array out = xt::zeros<real>({ids.size(), d});
    for (std::size_t j = 0; j < ids.size(); ++j) {
        for (std::size_t c = 0; c < d; ++c) out(j, c) = dense(static_cast<std::size_t>(ids[j]), c);
    }
    return out;
}

void require_close(const Array& got, const std::vector<double>& want, double tol = 1e-5) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("flat element " << i);
        REQUIRE(static_cast<double>(got.data()[i]) == Approx(want[i]).epsilon(tol).margin(1e-6));
    }
}

template <class F>
void require_value_error(F&& f, const std::string& fragment) {
    try {
        f();
    } catch (const ValueError& e) {
        INFO("message: " << e.what());
        REQUIRE(std::string(e.what()).find(fragment) != std::string::npos);
        return;
    }
    FAIL("expected a ValueError containing '" << fragment << "'");
}

const Tensor& state_tensor(const optim::OptimizerState& s, const std::string& name) {
    for (const auto& [n, t] : s.tensors) {
        if (n == name) return t;
    }
    FAIL("no state tensor " << name);
    throw;  // unreachable
}

// ---- the reference algorithms, in double, straight from the PyTorch docs ----------------------
// torch.optim.SGD: g ← g + λθ; b ← g (first step) or μb + (1 − τ)g; g ← g + μb (nesterov) or b;
// θ ← θ − γg.
struct RefSGD {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    std::vector<double> p, buf;

    void step(const std::vector<double>& g) {
        const bool first = buf.empty();
        if (first) buf.assign(p.size(), 0.0);
        for (std::size_t i = 0; i < p.size(); ++i) {
            double d = g[i] + weight_decay * p[i];
            if (momentum != 0) {
                buf[i] = first ? d : momentum * buf[i] + (1 - dampening) * d;
                d = nesterov ? d + momentum * buf[i] : buf[i];
            }
            p[i] -= lr * d;
        }
    }
};

// torch.optim.Adam / AdamW (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019):
// θ ← θ − γλθ (AdamW) | g ← g + λθ (Adam); m ← β1m + (1 − β1)g; v ← β2v + (1 − β2)g²;
// m̂ = m/(1 − β1^t); v̂ = v/(1 − β2^t) (v_max = max(v_max, v) in place of v with amsgrad);
// θ ← θ − γ m̂/(√v̂ + ε).
struct RefAdam {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, decoupled;
    std::vector<double> p, m, v, v_max;

    void step(const std::vector<double>& g, int t) {
        if (m.empty()) m = v = v_max = std::vector<double>(p.size(), 0.0);
        for (std::size_t i = 0; i < p.size(); ++i) {
            if (decoupled) p[i] -= lr * weight_decay * p[i];
            const double gi = decoupled ? g[i] : g[i] + weight_decay * p[i];
            m[i] = beta1 * m[i] + (1 - beta1) * gi;
            v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
            double v_used = v[i];
            if (amsgrad) v_used = v_max[i] = std::max(v_max[i], v[i]);
            const double m_hat = m[i] / (1 - std::pow(beta1, t));
            const double v_hat = v_used / (1 - std::pow(beta2, t));
            p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
        }
    }
};

}  // namespace

// ---- options ----------------------------------------------------------------------------------------

TEST_CASE("options have PyTorch's defaults and chain like LibTorch's", "[optim]") {
    optim::AdamOptions a;
    REQUIRE(a.lr() == 1e-3);
    REQUIRE(std::get<0>(a.betas()) == 0.9);
    REQUIRE(std::get<1>(a.betas()) == 0.999);
    REQUIRE(a.eps() == 1e-8);
    REQUIRE(a.weight_decay() == 0);
    REQUIRE_FALSE(a.amsgrad());
    REQUIRE(optim::AdamWOptions().weight_decay() == 1e-2);
    REQUIRE(optim::AdamWOptions().lr() == 1e-3);

    auto s = optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(1e-4).nesterov(false);
    REQUIRE(s.lr() == 0.1);
    REQUIRE(s.momentum() == 0.9);
    REQUIRE(s.dampening() == 0.1);
    REQUIRE(s.weight_decay() == 1e-4);
    auto b = optim::AdamOptions(3e-3).betas({0.8, 0.95}).eps(1e-6).amsgrad(true);
    REQUIRE(std::get<1>(b.betas()) == 0.95);
    REQUIRE(b.amsgrad());
}

// ---- SGD ------------------------------------------------------------------------------------------------

TEST_CASE("SGD matches torch.optim.SGD's formula over 5 steps", "[optim][sgd]") {
    struct Case {
        const char* what;
        optim::SGDOptions opts;
    };
    const std::vector<Case> cases = {
        {"plain", optim::SGDOptions(0.1)},
        {"momentum", optim::SGDOptions(0.1).momentum(0.9)},
        {"momentum + dampening", optim::SGDOptions(0.1).momentum(0.9).dampening(0.3)},
        {"nesterov", optim::SGDOptions(0.1).momentum(0.9).nesterov(true)},
        {"weight decay", optim::SGDOptions(0.1).weight_decay(0.05)},
        {"weight decay + momentum + dampening",
         optim::SGDOptions(0.05).momentum(0.8).dampening(0.5).weight_decay(0.1)},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        Tensor w = make_param({2, 3});
        optim::SGD opt(NamedTensors{{"w", w}}, c.opts);
        RefSGD ref{c.opts.lr(), c.opts.momentum(), c.opts.dampening(), c.opts.weight_decay(),
                   c.opts.nesterov(), to_double(w.data()), {}};
        for (int t = 1; t <= 5; ++t) {
            const Array g = grad_at(t, {2, 3});
            w.set_grad(from_array(g));
            opt.step();
            ref.step(to_double(g));
            require_close(w.data(), ref.p);
        }
        if (c.opts.momentum() != 0) {
            require_close(state_tensor(opt.state_dict(), "w.momentum_buffer").data(), ref.buf);
        }
    }
}

TEST_CASE("SGD's first momentum step uses b = g - not a damped zero buffer", "[optim][sgd]") {
    Tensor w({1.0f}, true);
    optim::SGD opt(NamedTensors{{"w", w}}, optim::SGDOptions(1.0).momentum(0.9).dampening(0.5));
    w.set_grad(Tensor({2.0f}));
    opt.step();
    REQUIRE(w.data()(0) == -1.0f);  // 1 − 1·2 (a zero-initialised damped buffer would give 0)
    opt.step();                     // b = 0.9·2 + 0.5·2 = 2.8
    REQUIRE(w.data()(0) == Approx(-3.8));
}

TEST_CASE("param groups: each group steps with its own lr and weight decay", "[optim][sgd]") {
    Tensor a = make_param({3}), b = make_param({3}, 1.0), c = make_param({3}, 2.0);
    std::vector<optim::ParamGroup> groups;
    groups.push_back(optim::ParamGroup{{{"a", a}}});              // lr, weight decay from options
    groups.push_back(optim::ParamGroup{{{"b", b}}, 0.01});         // own lr
    groups.push_back(optim::ParamGroup{{{"c", c}}, 0.5, 0.2});     // own lr and weight decay
    optim::SGD opt(groups, optim::SGDOptions(0.1));
    REQUIRE(opt.param_groups()[0].lr == 0.1);
    REQUIRE(opt.param_groups()[0].weight_decay == 0.0);
    REQUIRE(opt.param_groups()[1].lr == 0.01);
    REQUIRE(opt.param_groups()[2].weight_decay == 0.2);

    RefSGD ra{0.1, 0, 0, 0, false, to_double(a.data()), {}};
    RefSGD rb{0.01, 0, 0, 0, false, to_double(b.data()), {}};
    RefSGD rc{0.5, 0, 0, 0.2, false, to_double(c.data()), {}};
    for (int t = 1; t <= 3; ++t) {
        const Array g = grad_at(t, {3});
        for (Tensor* p : {&a, &b, &c}) p->set_grad(from_array(g));
        opt.step();
        for (RefSGD* r : {&ra, &rb, &rc}) r->step(to_double(g));
    }
    require_close(a.data(), ra.p);
    require_close(b.data(), rb.p);
    require_close(c.data(), rc.p);
}

// ---- Adam and AdamW ------------------------------------------------------------------------------------

TEST_CASE("Adam and AdamW match the documented formulas over 5 steps", "[optim][adam]") {
    struct Case {
        const char* what;
        double lr, beta1, beta2, eps, weight_decay;
        bool amsgrad, decoupled;
    };
    const std::vector<Case> cases = {
        {"Adam", 0.05, 0.9, 0.999, 1e-8, 0.0, false, false},
        {"Adam, weight decay (L2)", 0.05, 0.9, 0.999, 1e-8, 0.1, false, false},
        {"Adam, amsgrad", 0.05, 0.8, 0.9, 1e-8, 0.0, true, false},
        {"Adam, amsgrad + weight decay", 0.02, 0.8, 0.9, 1e-6, 0.05, true, false},
        {"AdamW", 0.05, 0.9, 0.999, 1e-8, 0.1, false, true},
        {"AdamW, amsgrad", 0.05, 0.8, 0.9, 1e-8, 0.01, true, true},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        Tensor w = make_param({3, 4});
        std::unique_ptr<optim::Optimizer> opt;
        if (c.decoupled) {
            opt = std::make_unique<optim::AdamW>(NamedTensors{{"w", w}},
                                                 optim::AdamWOptions(c.lr)
                                                     .betas({c.beta1, c.beta2})
                                                     .eps(c.eps)
                                                     .weight_decay(c.weight_decay)
                                                     .amsgrad(c.amsgrad));
        } else {
            opt = std::make_unique<optim::Adam>(NamedTensors{{"w", w}},
                                                optim::AdamOptions(c.lr)
                                                    .betas({c.beta1, c.beta2})
                                                    .eps(c.eps)
                                                    .weight_decay(c.weight_decay)
                                                    .amsgrad(c.amsgrad));
        }
        RefAdam ref{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad, c.decoupled,
                    to_double(w.data()), {}, {}, {}};
        for (int t = 1; t <= 5; ++t) {
            const Array g = grad_at(t, {3, 4});
            w.set_grad(from_array(g));
            opt->step();
            ref.step(to_double(g), t);
            require_close(w.data(), ref.p);
        }
        const optim::OptimizerState s = opt->state_dict();
        require_close(state_tensor(s, "w.exp_avg").data(), ref.m);
        require_close(state_tensor(s, "w.exp_avg_sq").data(), ref.v);
        REQUIRE(s.metadata.at("w.step") == "5");
        if (c.amsgrad) {
            require_close(state_tensor(s, "w.max_exp_avg_sq").data(), ref.v_max);
            // The case exercises amsgrad: somewhere v has fallen below its running maximum.
            bool differs = false;
            for (std::size_t i = 0; i < ref.v.size(); ++i) differs = differs || ref.v[i] < ref.v_max[i];
            REQUIRE(differs);
        }
    }
}

TEST_CASE("Adam's L2 and AdamW's decoupled decay give different updates", "[optim][adam]") {
    Tensor a = make_param({4}), b = clone_param(a);
    optim::Adam adam(NamedTensors{{"w", a}}, optim::AdamOptions(0.1).weight_decay(0.5));
    optim::AdamW adamw(NamedTensors{{"w", b}}, optim::AdamWOptions(0.1).weight_decay(0.5));
    for (int t = 1; t <= 3; ++t) {
        a.set_grad(from_array(grad_at(t, {4})));
        b.set_grad(from_array(grad_at(t, {4})));
        adam.step();
        adamw.step();
    }
    REQUIRE_FALSE(exactly_equal(a.data(), b.data()));
}

// ---- sparse gradients: lazy updates -------------------------------------------------------------------

TEST_CASE("lazy Adam/AdamW equal the dense update when every row is touched at every step",
          "[optim][adam][sparse]") {
    const std::size_t V = 6, d = 3;
    const std::vector<std::int64_t> all_rows = {5, 0, 3, 1, 4, 2};  // unsorted; accumulate sorts
    for (bool decoupled : {false, true}) {
        INFO((decoupled ? "AdamW" : "Adam"));
        Tensor dense = make_param({V, d}), lazy = clone_param(dense);
        std::unique_ptr<optim::Optimizer> od, ol;
        if (decoupled) {
            od = std::make_unique<optim::AdamW>(NamedTensors{{"emb", dense}},
                                                optim::AdamWOptions(0.05).weight_decay(0.1));
            ol = std::make_unique<optim::AdamW>(NamedTensors{{"emb", lazy}},
                                                optim::AdamWOptions(0.05).weight_decay(0.1));
        } else {
            od = std::make_unique<optim::Adam>(NamedTensors{{"emb", dense}},
                                               optim::AdamOptions(0.05).weight_decay(0.01));
            ol = std::make_unique<optim::Adam>(NamedTensors{{"emb", lazy}},
                                               optim::AdamOptions(0.05).weight_decay(0.01));
        }
        for (int t = 1; t <= 4; ++t) {
            const Array g = grad_at(t, {V, d});
            dense.set_grad(from_array(g));
            set_sparse_grad(lazy, all_rows, rows_of(g, all_rows));
            REQUIRE(lazy.sparse_grad()->indices.size() == V);
            od->step();
            ol->step();
            require_close(lazy.data(), to_double(dense.data()), 1e-6);
        }
        const auto sd = od->state_dict(), sl = ol->state_dict();
        require_close(state_tensor(sl, "emb.exp_avg").data(),
                      to_double(state_tensor(sd, "emb.exp_avg").data()), 1e-6);
        require_close(state_tensor(sl, "emb.exp_avg_sq").data(),
                      to_double(state_tensor(sd, "emb.exp_avg_sq").data()), 1e-6);
        REQUIRE(sl.metadata.at("emb.step") == "4");
    }
}

TEST_CASE("lazy Adam/AdamW: untouched rows and their state do not move - t counts the tensor's steps",
          "[optim][adam][sparse]") {
    const std::size_t V = 6, d = 3;
    // Rows touched per step; step 4 has a gradient with k = 0 rows (it still counts: t = 4).
    const std::vector<std::vector<std::int64_t>> touched = {{1, 4}, {3, 1}, {4}, {}};
    for (bool decoupled : {false, true}) {
        INFO((decoupled ? "AdamW" : "Adam"));
        const double lr = 0.05, wd = decoupled ? 0.1 : 0.01;
        Tensor emb = make_param({V, d});
        const Array init = emb.data();
        std::unique_ptr<optim::Optimizer> opt;
        if (decoupled) {
            opt = std::make_unique<optim::AdamW>(NamedTensors{{"emb", emb}},
                                                 optim::AdamWOptions(lr).weight_decay(wd));
        } else {
            opt = std::make_unique<optim::Adam>(NamedTensors{{"emb", emb}},
                                                optim::AdamOptions(lr).weight_decay(wd));
        }
        // One reference per row, stepped only when the row is touched, with the tensor's t.
        std::vector<RefAdam> ref;
        for (std::size_t r = 0; r < V; ++r) {
            std::vector<double> row(init.data() + r * d, init.data() + (r + 1) * d);
            ref.push_back(RefAdam{lr, 0.9, 0.999, 1e-8, wd, false, decoupled, row, {}, {}, {}});
        }
        Array after_step1;
        for (int t = 1; t <= 4; ++t) {
            const Array g = grad_at(t, {V, d});
            const auto& ids = touched[static_cast<std::size_t>(t - 1)];
            set_sparse_grad(emb, ids, rows_of(g, ids));
            opt->step();
            for (std::int64_t r : ids) {
                const auto rr = static_cast<std::size_t>(r);
                ref[rr].step(std::vector<double>(g.data() + rr * d, g.data() + (rr + 1) * d), t);
            }
            if (t == 1) after_step1 = emb.data();
        }
        // Row 3 was first touched at step 2: after step 1 it was still the initial row.
        for (std::size_t c = 0; c < d; ++c) REQUIRE(after_step1(3, c) == init(3, c));

        const auto s = opt->state_dict();
        REQUIRE(s.metadata.at("emb.step") == "4");
        const Array& m = state_tensor(s, "emb.exp_avg").data();
        const Array& v = state_tensor(s, "emb.exp_avg_sq").data();
        for (std::size_t r = 0; r < V; ++r) {
            INFO("row " << r);
            const bool seen = r == 1 || r == 3 || r == 4;
            for (std::size_t c = 0; c < d; ++c) {
                if (!seen) {  // bit-for-bit unchanged, no decay of weights or moments
                    REQUIRE(emb.data()(r, c) == init(r, c));
                    REQUIRE(m(r, c) == 0.0f);
                    REQUIRE(v(r, c) == 0.0f);
                } else {
                    REQUIRE(emb.data()(r, c) == Approx(ref[r].p[c]).epsilon(1e-5).margin(1e-6));
                    REQUIRE(m(r, c) == Approx(ref[r].m[c]).epsilon(1e-5).margin(1e-6));
                    REQUIRE(v(r, c) == Approx(ref[r].v[c]).epsilon(1e-5).margin(1e-6));
                }
            }
        }
    }
}

TEST_CASE("SGD with a sparse gradient updates touched rows only", "[optim][sgd][sparse]") {
    const std::size_t V = 5, d = 2;
    Tensor emb = make_param({V, d});
    const Array init = emb.data();
    optim::SGD opt(NamedTensors{{"emb", emb}}, optim::SGDOptions(0.5).weight_decay(0.1));
    const Array g = grad_at(1, {V, d});
    set_sparse_grad(emb, {3, 0, 3}, rows_of(g, {3, 0, 3}));  // row 3 twice: its rows sum
    opt.step();
    for (std::size_t r = 0; r < V; ++r) {
        for (std::size_t c = 0; c < d; ++c) {
            const double mult = r == 3 ? 2.0 : (r == 0 ? 1.0 : 0.0);
            if (mult == 0) {
                REQUIRE(emb.data()(r, c) == init(r, c));
            } else {
                const double p0 = init(r, c);
                REQUIRE(emb.data()(r, c) == Approx(p0 - 0.5 * (mult * g(r, c) + 0.1 * p0)).epsilon(1e-6));
            }
        }
    }
}

TEST_CASE("unsupported sparse combinations throw before anything changes", "[optim][sparse]") {
    Tensor emb = make_param({4, 2}), w = make_param({3});
    const Array emb0 = emb.data(), w0 = w.data();
    const NamedTensors params{{"emb", emb}, {"w", w}};
    w.set_grad(from_array(grad_at(1, {3})));
    set_sparse_grad(emb, {1}, rows_of(grad_at(1, {4, 2}), {1}));

    optim::SGD sgd(params, optim::SGDOptions(0.1).momentum(0.9));
    require_value_error([&] { sgd.step(); }, "momentum");
    optim::Adam ams(params, optim::AdamOptions(0.1).amsgrad(true));
    require_value_error([&] { ams.step(); }, "amsgrad");
    REQUIRE(exactly_equal(emb.data(), emb0));
    REQUIRE(exactly_equal(w.data(), w0));
    REQUIRE(sgd.memory_report().total().state_bytes() == 0);
    REQUIRE(ams.memory_report().total().state_bytes() == 0);
}

// ---- memory report ------------------------------------------------------------------------------------

namespace {

// An "embedding" table (V, d) = (50, 8) and a Linear-like layer: weight (4, 8), bias (4,).
struct TinyModel {
    Tensor emb = make_param({50, 8});
    Tensor weight = make_param({4, 8}, 1.0);
    Tensor bias = make_param({4}, 2.0);
    NamedTensors params() const { return {{"emb.weight", emb}, {"fc.weight", weight}, {"fc.bias", bias}}; }

    // emb: sparse gradient of 3 rows (IDs 2, 7, 7, 30), or dense; fc: dense.
    void set_grads(int t, bool sparse_emb) {
        const Array ge = grad_at(t, {50, 8});
        if (sparse_emb) {
            set_sparse_grad(emb, {2, 7, 7, 30}, rows_of(ge, {2, 7, 7, 30}));
        } else {
            emb.set_grad(from_array(ge));
        }
        weight.set_grad(from_array(grad_at(t, {4, 8})));
        bias.set_grad(from_array(grad_at(t, {4})));
    }
};

struct Expected {  // state bytes per parameter: exp_avg, exp_avg_sq, max_exp_avg_sq, momentum, step
    std::size_t m, v, v_max, b, step;
};

void check_row(const optim::MemoryRow& r, const Expected& e) {
    INFO(r.name);
    REQUIRE(r.exp_avg_bytes == e.m);
    REQUIRE(r.exp_avg_sq_bytes == e.v);
    REQUIRE(r.max_exp_avg_sq_bytes == e.v_max);
    REQUIRE(r.momentum_buffer_bytes == e.b);
    REQUIRE(r.step_bytes == e.step);
    REQUIRE(r.state_bytes() == e.m + e.v + e.v_max + e.b + e.step);
}

// Before any step: parameter bytes exact, no state; then grads, a step, and the given state.
void check_report(optim::Optimizer& opt, TinyModel& model, bool sparse_emb,
                  const std::vector<Expected>& after) {
    auto before = opt.memory_report();
    REQUIRE(before.rows.size() == 3);
    REQUIRE(before.rows[0].name == "emb.weight");
    REQUIRE(before.rows[0].shape == Shape{50, 8});
    REQUIRE(before.rows[0].numel == 400);
    REQUIRE(before.rows[0].param_bytes == 1600);  // 400 · 4
    REQUIRE(before.rows[1].param_bytes == 128);   // 32 · 4
    REQUIRE(before.rows[2].param_bytes == 16);    // 4 · 4
    for (const auto& r : before.rows) {
        REQUIRE(r.grad_bytes == 0);
        check_row(r, {0, 0, 0, 0, 0});
        REQUIRE(r.last_update == optim::LastUpdate::none);
    }
    model.set_grads(1, sparse_emb);
    REQUIRE(opt.memory_report().total().state_bytes() == 0);  // gradients alone allocate no state
    opt.step();

    const auto rep = opt.memory_report();
    // Gradients: sparse = k·(8 + d·4) = 3·(8 + 32) = 120; dense = numel · 4.
    REQUIRE(rep.rows[0].grad_bytes == (sparse_emb ? 120u : 1600u));
    REQUIRE(rep.rows[1].grad_bytes == 128);
    REQUIRE(rep.rows[2].grad_bytes == 16);
    for (std::size_t i = 0; i < 3; ++i) check_row(rep.rows[i], after[i]);
    REQUIRE(rep.rows[0].last_update == (sparse_emb ? optim::LastUpdate::sparse : optim::LastUpdate::dense));
    REQUIRE(rep.rows[0].rows_touched == (sparse_emb ? 3u : 50u));
    REQUIRE(rep.rows[0].rows == 50);
    REQUIRE(rep.rows[1].rows_touched == 4);
    REQUIRE(rep.rows[2].rows_touched == 4);  // a 1-d tensor: each element is a row

    const auto total = rep.total();
    std::size_t state = 0;
    for (const auto& e : after) state += e.m + e.v + e.v_max + e.b + e.step;
    REQUIRE(total.state_bytes() == state);
    REQUIRE(total.param_bytes == 1744);
    REQUIRE(total.numel == 436);
    REQUIRE(rep.rows[0].state_bytes_per_element() == Approx(static_cast<double>(after[0].m + after[0].v +
                                                                            after[0].v_max + after[0].b +
                                                                            after[0].step) / 400.0));

    // A parameter without a gradient at the next step keeps its state; nothing touched.
    model.weight.reset_grad();
    opt.step();
    const auto rep2 = opt.memory_report();
    REQUIRE(rep2.rows[1].state_bytes() == after[1].m + after[1].v + after[1].v_max + after[1].b + after[1].step);
    REQUIRE(rep2.rows[1].last_update == optim::LastUpdate::none);
    REQUIRE(rep2.rows[1].rows_touched == 0);
    REQUIRE(rep2.rows[1].grad_bytes == 0);
}

}  // namespace

TEST_CASE("memory report: exact bytes for SGD - SGD with momentum - Adam - amsgrad - AdamW",
          "[optim][memory]") {
    SECTION("SGD without momentum keeps no state") {
        TinyModel m;
        optim::SGD opt(m.params(), optim::SGDOptions(0.1));
        check_report(opt, m, true, {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}});
        REQUIRE(opt.memory_report().state_columns.empty());
    }
    SECTION("SGD with momentum: one buffer per parameter, no step counter") {
        TinyModel m;
        optim::SGD opt(m.params(), optim::SGDOptions(0.1).momentum(0.9));
        check_report(opt, m, false, {{0, 0, 0, 1600, 0}, {0, 0, 0, 128, 0}, {0, 0, 0, 16, 0}});
    }
    SECTION("Adam: m, v and an 8-byte step count; the sparse table's state is dense") {
        TinyModel m;
        optim::Adam opt(m.params(), optim::AdamOptions(0.01));
        check_report(opt, m, true, {{1600, 1600, 0, 0, 8}, {128, 128, 0, 0, 8}, {16, 16, 0, 0, 8}});
        REQUIRE(opt.memory_report().state_columns ==
                std::vector<std::string>{"exp_avg", "exp_avg_sq", "step"});
    }
    SECTION("Adam with amsgrad adds v_max") {
        TinyModel m;
        optim::Adam opt(m.params(), optim::AdamOptions(0.01).amsgrad(true));
        check_report(opt, m, false,
                     {{1600, 1600, 1600, 0, 8}, {128, 128, 128, 0, 8}, {16, 16, 16, 0, 8}});
    }
    SECTION("AdamW: the same state as Adam") {
        TinyModel m;
        optim::AdamW opt(m.params());
        check_report(opt, m, true, {{1600, 1600, 0, 0, 8}, {128, 128, 0, 0, 8}, {16, 16, 0, 0, 8}});
    }
}

TEST_CASE("memory report prints an aligned table with units", "[optim][memory]") {
    TinyModel m;
    optim::Adam opt(m.params(), optim::AdamOptions(0.01));
    m.set_grads(1, true);
    opt.step();
    std::ostringstream os;
    os << opt.memory_report();
    const std::string text = os.str();
    INFO(text);
    for (const char* part : {"Adam optimizer memory", "emb.weight", "(50, 8)", "exp_avg_sq", "KiB",
                             "B/element", "sparse", "3/50", "dense", "total", "3512",
                             "optimizer state 3.43 KiB"}) {
        REQUIRE(text.find(part) != std::string::npos);
    }
    // Aligned: every line between the title and the summary (header, units, rules, rows,
    // total) has the same width.
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    REQUIRE(lines.size() == 1 + 2 + 1 + 3 + 1 + 1 + 1);
    for (std::size_t i = 2; i + 1 < lines.size(); ++i) REQUIRE(lines[i].size() == lines[1].size());
    REQUIRE(optim::human_bytes(512) == "512 B");
    REQUIRE(optim::human_bytes(1536) == "1.50 KiB");
    REQUIRE(optim::human_bytes(3u * 1024 * 1024) == "3.00 MiB");
}

// ---- state dict -------------------------------------------------------------------------------------------

namespace {

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(const NamedTensors&)>;

void train(optim::Optimizer& opt, TinyModel& m, int from, int to, bool sparse_emb,
           optim::CosineWithWarmup* sched = nullptr) {
    for (int t = from; t < to; ++t) {
        opt.zero_grad();
        m.set_grads(t, sparse_emb);
        opt.step();
        if (sched) sched->step();
    }
}

// Train N steps, save, train M more; vs a fresh optimizer on the saved parameters with the
// loaded state, trained the same M steps: the parameters must agree bit for bit.
void check_resume(const MakeOpt& make, bool sparse_emb, bool with_schedule) {
    const int N = 3, M = 4;
    TinyModel a;
    auto opt_a = make(a.params());
    std::unique_ptr<optim::CosineWithWarmup> sched_a;
    if (with_schedule) sched_a = std::make_unique<optim::CosineWithWarmup>(*opt_a, 2, 10, 1e-4);
    train(*opt_a, a, 1, N + 1, sparse_emb, sched_a.get());

    const optim::OptimizerState saved = opt_a->state_dict();
    TinyModel b;  // the checkpointed parameters
    b.emb = clone_param(a.emb);
    b.weight = clone_param(a.weight);
    b.bias = clone_param(a.bias);

    train(*opt_a, a, N + 1, N + M + 1, sparse_emb, sched_a.get());

    auto opt_b = make(b.params());
    std::unique_ptr<optim::CosineWithWarmup> sched_b;
    if (with_schedule) sched_b = std::make_unique<optim::CosineWithWarmup>(*opt_b, 2, 10, 1e-4);
    opt_b->load_state_dict(saved);
    if (with_schedule) sched_b->set_step(N);
    REQUIRE(opt_b->state_dict().metadata == saved.metadata);
    train(*opt_b, b, N + 1, N + M + 1, sparse_emb, sched_b.get());

    REQUIRE(exactly_equal(a.emb.data(), b.emb.data()));
    REQUIRE(exactly_equal(a.weight.data(), b.weight.data()));
    REQUIRE(exactly_equal(a.bias.data(), b.bias.data()));
    const auto sa = opt_a->state_dict(), sb = opt_b->state_dict();
    REQUIRE(sa.metadata == sb.metadata);
    REQUIRE(sa.tensors.size() == sb.tensors.size());
    for (std::size_t i = 0; i < sa.tensors.size(); ++i) {
        REQUIRE(sa.tensors[i].first == sb.tensors[i].first);
        REQUIRE(exactly_equal(sa.tensors[i].second.data(), sb.tensors[i].second.data()));
    }
}

}  // namespace

TEST_CASE("state_dict / load_state_dict resume training bit for bit", "[optim][state]") {
    SECTION("Adam, weight decay, sparse embedding") {
        check_resume([](const NamedTensors& p) {
            return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01).weight_decay(0.01));
        }, true, false);
    }
    SECTION("AdamW with a cosine schedule (lr restored from the state)") {
        check_resume([](const NamedTensors& p) {
            return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.01));
        }, true, true);
    }
    SECTION("Adam with amsgrad, dense") {
        check_resume([](const NamedTensors& p) {
            return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01).amsgrad(true));
        }, false, false);
    }
    SECTION("SGD with Nesterov momentum and two param groups") {
        check_resume([](const NamedTensors& p) {
            std::vector<optim::ParamGroup> groups{optim::ParamGroup{{p[0]}, 0.05},
                                                  optim::ParamGroup{{p[1], p[2]}}};
            return std::make_unique<optim::SGD>(groups, optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
        }, false, true);
    }
}

TEST_CASE("state dict names and contents", "[optim][state]") {
    TinyModel m;
    optim::Adam opt(m.params(), optim::AdamOptions(0.01).betas({0.8, 0.95}));
    auto s0 = opt.state_dict();
    REQUIRE(s0.tensors.empty());  // lazy: nothing before the first step
    REQUIRE(s0.metadata.at("optimizer") == "Adam");
    REQUIRE(s0.metadata.at("beta1") == "0.8");
    REQUIRE(s0.metadata.at("beta2") == "0.95");
    REQUIRE(s0.metadata.at("eps") == "1e-08");
    REQUIRE(s0.metadata.at("amsgrad") == "false");
    REQUIRE(s0.metadata.at("param_groups") == "1");
    REQUIRE(s0.metadata.at("group.0.lr") == "0.01");
    REQUIRE(s0.metadata.at("fc.bias.group") == "0");
    REQUIRE(s0.metadata.count("fc.bias.step") == 0);

    m.set_grads(1, true);
    m.weight.reset_grad();  // fc.weight has no gradient: it gets no state
    opt.step();
    const auto s = opt.state_dict();
    std::vector<std::string> names;
    for (const auto& [n, t] : s.tensors) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"emb.weight.exp_avg", "emb.weight.exp_avg_sq",
                                              "fc.bias.exp_avg", "fc.bias.exp_avg_sq"});
    REQUIRE(state_tensor(s, "emb.weight.exp_avg").shape() == Shape{50, 8});
    REQUIRE(s.metadata.at("emb.weight.step") == "1");
    REQUIRE(s.metadata.count("fc.weight.step") == 0);

    // Loading into a fresh optimizer before its first step, then one more step each: equal.
    TinyModel m2;
    m2.emb = clone_param(m.emb);
    m2.weight = clone_param(m.weight);
    m2.bias = clone_param(m.bias);
    optim::Adam opt2(m2.params(), optim::AdamOptions(0.01).betas({0.8, 0.95}));
    opt2.load_state_dict(s);
    m.set_grads(2, true);
    m2.set_grads(2, true);
    opt.step();
    opt2.step();
    REQUIRE(exactly_equal(m.emb.data(), m2.emb.data()));
    REQUIRE(exactly_equal(m.weight.data(), m2.weight.data()));
}

TEST_CASE("load_state_dict rejects mismatches with clear messages and changes nothing",
          "[optim][state][errors]") {
    Tensor w = make_param({2, 3});
    optim::Adam opt(NamedTensors{{"w", w}}, optim::AdamOptions(0.01));
    w.set_grad(from_array(grad_at(1, {2, 3})));
    opt.step();
    const auto good = opt.state_dict();

    auto require_untouched = [&] {
        const auto now = opt.state_dict();
        REQUIRE(now.metadata == good.metadata);
        REQUIRE(now.tensors.size() == good.tensors.size());
        for (std::size_t i = 0; i < now.tensors.size(); ++i) {
            REQUIRE(exactly_equal(now.tensors[i].second.data(), good.tensors[i].second.data()));
        }
    };

    SECTION("different parameter names") {
        Tensor v = make_param({2, 3});
        optim::Adam other(NamedTensors{{"v", v}}, optim::AdamOptions(0.01));
        v.set_grad(from_array(grad_at(1, {2, 3})));
        other.step();
        require_value_error([&] { opt.load_state_dict(other.state_dict()); }, "parameter 'w'");
        require_untouched();
    }
    SECTION("different shapes") {
        Tensor v = make_param({3, 2});
        optim::Adam other(NamedTensors{{"w", v}}, optim::AdamOptions(0.01));
        v.set_grad(from_array(grad_at(1, {3, 2})));
        other.step();
        auto bad = other.state_dict();
        bad.metadata["group.0.lr"] = "0.5";  // would change the lr if applied before the throw
        require_value_error([&] { opt.load_state_dict(bad); }, "has shape (3, 2) but parameter 'w' has shape (2, 3)");
        require_untouched();
        REQUIRE(opt.param_groups()[0].lr == 0.01);
    }
    SECTION("an unexpected tensor") {
        auto bad = good;
        bad.tensors.emplace_back("w.momentum_buffer", zeros({2, 3}));
        require_value_error([&] { opt.load_state_dict(bad); }, "w.momentum_buffer");
        require_untouched();
    }
    SECTION("a missing buffer") {
        auto bad = good;
        bad.tensors.pop_back();  // w.exp_avg_sq
        require_value_error([&] { opt.load_state_dict(bad); }, "w.exp_avg_sq");
        require_untouched();
    }
    SECTION("another optimizer or other options") {
        optim::SGD sgd(NamedTensors{{"w", make_param({2, 3})}}, optim::SGDOptions(0.1));
        require_value_error([&] { opt.load_state_dict(sgd.state_dict()); }, "from optimizer 'SGD'");
        auto bad = good;
        bad.metadata["beta2"] = "0.99";
        require_value_error([&] { opt.load_state_dict(bad); }, "option 'beta2' is 0.99 in the state but 0.999");
        bad = good;
        bad.metadata.erase("w.step");
        require_value_error([&] { opt.load_state_dict(bad); }, "step count");
        require_untouched();
    }
}

// ---- autograd: updates are not recorded ---------------------------------------------------------------

TEST_CASE("step() builds no graph: parameters stay leaves", "[optim]") {
    Tensor w = make_param({3}), e = make_param({4, 2});
    std::vector<std::unique_ptr<optim::Optimizer>> opts;
    opts.push_back(std::make_unique<optim::SGD>(NamedTensors{{"w", w}, {"e", e}},
                                                optim::SGDOptions(0.1)));
    opts.push_back(std::make_unique<optim::Adam>(NamedTensors{{"w", w}, {"e", e}}));
    opts.push_back(std::make_unique<optim::AdamW>(NamedTensors{{"w", w}, {"e", e}}));
    for (auto& opt : opts) {
        for (int t = 0; t < 2; ++t) {
            opt->zero_grad();
            Tensor loss = (w * w).sum();
            loss.backward();
            set_sparse_grad(e, {1}, rows_of(grad_at(t, {4, 2}), {1}));
            opt->step();
            REQUIRE(w.is_leaf());
            REQUIRE(w.grad_fn() == nullptr);
            REQUIRE(w.requires_grad());
            REQUIRE(e.is_leaf());
            REQUIRE(grad_enabled());
        }
    }
}

// ---- zero_grad ------------------------------------------------------------------------------------------

TEST_CASE("zero_grad: set_to_none drops gradients - otherwise zeroes them in place", "[optim]") {
    Tensor w = make_param({2, 2}), e = make_param({5, 3});
    optim::Adam opt(NamedTensors{{"w", w}, {"e", e}}, optim::AdamOptions(0.1));
    w.set_grad(from_array(grad_at(1, {2, 2})));
    set_sparse_grad(e, {0, 4}, rows_of(grad_at(1, {5, 3}), {0, 4}));
    opt.zero_grad(/*set_to_none=*/false);
    REQUIRE(w.grad().shape() == Shape{2, 2});
    for (real x : w.grad().data()) REQUIRE(x == 0.0f);
    REQUIRE(e.sparse_grad() != nullptr);
    REQUIRE(e.sparse_grad()->indices.empty());
    REQUIRE(opt.memory_report().rows[1].grad_bytes == 0);

    // A zero dense gradient and an empty sparse one still count as a step: t = 1.
    const Array e0 = e.data();
    opt.step();
    REQUIRE(opt.state_dict().metadata.at("e.step") == "1");
    REQUIRE(exactly_equal(e.data(), e0));

    opt.zero_grad();
    REQUIRE_FALSE(w.has_grad());
    REQUIRE_FALSE(e.has_grad());
}

// ---- clip_grad_norm_ ----------------------------------------------------------------------------------

TEST_CASE("clip_grad_norm_ measures dense and sparse gradients together", "[optim][clip]") {
    Tensor a = from_array(xt::zeros<real>({2, 2}), true);
    Tensor e = from_array(xt::zeros<real>({6, 2}), true);
    Tensor none = from_array(xt::zeros<real>({3}), true);  // no gradient: skipped
    auto reset = [&] {
        a.set_grad(Tensor({{3.0f, 0.0f}, {0.0f, 4.0f}}));
        Array row = xt::zeros<real>({1, 2});
        row(0, 1) = 12.0f;
        set_sparse_grad(e, {5}, row);
    };
    const NamedTensors params{{"a", a}, {"e", e}, {"none", none}};

    reset();  // ‖G‖₂ = √(9 + 16 + 144) = 13
    double norm = optim::clip_grad_norm_(params, 1.3);
    REQUIRE(norm == Approx(13.0));
    const double coef = 1.3 / (13.0 + 1e-6);
    REQUIRE(a.grad().data()(0, 0) == Approx(3 * coef));
    REQUIRE(a.grad().data()(1, 1) == Approx(4 * coef));
    REQUIRE(e.sparse_grad()->values(0, 1) == Approx(12 * coef));
    REQUIRE(optim::clip_grad_norm_(params, 100.0) == Approx(1.3).epsilon(1e-6));

    reset();  // below max_norm: unchanged, bit for bit
    REQUIRE(optim::clip_grad_norm_(params, 20.0) == Approx(13.0));
    REQUIRE(a.grad().data()(1, 1) == 4.0f);

    reset();  // ‖G‖∞ = 12, ‖G‖₁ = 19
    REQUIRE(optim::clip_grad_norm_(params, 100.0, std::numeric_limits<double>::infinity()) == Approx(12.0));
    REQUIRE(optim::clip_grad_norm_(params, 100.0, 1.0) == Approx(19.0));
    require_value_error([&] { optim::clip_grad_norm_(params, -1.0); }, "max_norm");
    require_value_error([&] { optim::clip_grad_norm_(params, 1.0, 0.0); }, "norm_type");
}

// ---- CosineWithWarmup -------------------------------------------------------------------------------

TEST_CASE("CosineWithWarmup: linear warmup from 0 - cosine decay to min_lr", "[optim][schedule]") {
    Tensor a = make_param({2}), b = make_param({2});
    std::vector<optim::ParamGroup> groups{optim::ParamGroup{{{"a", a}}}, optim::ParamGroup{{{"b", b}}, 0.5}};
    optim::SGD opt(groups, optim::SGDOptions(1.0));
    optim::CosineWithWarmup sched(opt, /*warmup_steps=*/10, /*total_steps=*/110, /*min_lr=*/0.1);
    const double pi = std::acos(-1.0);
    REQUIRE(sched.lr_at(0) == 0.0);
    REQUIRE(sched.lr_at(5) == Approx(0.5));
    REQUIRE(sched.lr_at(10) == Approx(1.0));
    REQUIRE(sched.lr_at(35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(pi * 0.25))));
    REQUIRE(sched.lr_at(60) == Approx(0.55));
    REQUIRE(sched.lr_at(110) == Approx(0.1));
    REQUIRE(sched.lr_at(1000) == 0.1);
    REQUIRE(sched.lr_at(60, 1) == Approx(0.1 + 0.4 * 0.5));

    REQUIRE(opt.param_groups()[0].lr == 0.0);  // the constructor sets lr(0)
    sched.step();
    REQUIRE(opt.param_groups()[0].lr == Approx(0.1));
    REQUIRE(opt.param_groups()[1].lr == Approx(0.05));
    sched.set_step(60);
    REQUIRE(opt.param_groups()[0].lr == Approx(0.55));
    REQUIRE(sched.current_step() == 60);

    require_value_error([&] { optim::CosineWithWarmup(opt, 10, 5); }, "total_steps");
    require_value_error([&] { optim::CosineWithWarmup(opt, 0, 5, 2.0); }, "min_lr");
}

// ---- bad inputs ------------------------------------------------------------------------------------------

TEST_CASE("bad options and parameters throw ValueError with clear messages", "[optim][errors]") {
    Tensor w = make_param({2});
    const NamedTensors p{{"w", w}};
    require_value_error([&] { optim::SGD(p, optim::SGDOptions(-0.1)); }, "SGD: invalid learning rate -0.1");
    require_value_error([&] { optim::SGD(p, optim::SGDOptions(0.1).momentum(-1)); }, "momentum");
    require_value_error([&] { optim::SGD(p, optim::SGDOptions(0.1).nesterov(true)); }, "Nesterov");
    require_value_error([&] { optim::SGD(p, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)); },
                        "zero dampening");
    require_value_error([&] { optim::Adam(p, optim::AdamOptions(-1e-3)); }, "Adam: invalid learning rate");
    require_value_error([&] { optim::Adam(p, optim::AdamOptions().betas({1.0, 0.999})); }, "beta1 1");
    require_value_error([&] { optim::Adam(p, optim::AdamOptions().betas({-0.1, 0.999})); }, "beta1");
    require_value_error([&] { optim::Adam(p, optim::AdamOptions().betas({0.9, 1.0})); }, "0 <= beta2 < 1");
    require_value_error([&] { optim::AdamW(p, optim::AdamWOptions().eps(-1)); }, "eps");
    require_value_error([&] { optim::AdamW(p, optim::AdamWOptions().weight_decay(-0.1)); }, "weight_decay");
    require_value_error([&] { optim::AdamW(p, optim::AdamWOptions(std::nan(""))); }, "learning rate");

    require_value_error([&] { optim::Adam(NamedTensors{}); }, "empty parameter list");
    require_value_error([&] { optim::Adam(NamedTensors{{"w", w}, {"w", make_param({2})}}); }, "appears twice");
    require_value_error([&] { optim::Adam(NamedTensors{{"w", w}, {"v", w}}); }, "twice");
    Tensor not_leaf = w * 2.0f;
    require_value_error([&] { optim::Adam(NamedTensors{{"h", not_leaf}}); }, "not a leaf");
    require_value_error([&] {
        optim::Adam(std::vector<optim::ParamGroup>{optim::ParamGroup{p, -1.0}});
    }, "invalid learning rate -1 in param group 0");
}
