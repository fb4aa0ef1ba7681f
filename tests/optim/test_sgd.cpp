// tests/optim/test_sgd.cpp — optim::SGD against torch.optim.SGD's formula, recomputed in double (RefSGD):
// momentum, dampening, nesterov, weight decay, param groups, and row-sparse gradients.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/test_helpers.hpp.
#include <catch2/catch.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

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
