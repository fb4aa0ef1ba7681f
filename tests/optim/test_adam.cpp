// tests/optim/test_adam.cpp — optim::Adam and AdamW against the documented update (RefAdam), bias
// correction and amsgrad included, and the lazy row-sparse updates of a table (sparse Adam).
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/test_helpers.hpp.
#include <catch2/catch.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

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
