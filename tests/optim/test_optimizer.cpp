// tests/optim/test_optimizer.cpp — the Optimizer base (optim/optimizer.cpp): options and their
// PyTorch defaults, state dicts that resume training bit for bit, step() recording no graph,
// zero_grad, the errors for bad options and parameters, and state dicts refused on load (numbers
// in more than one spelling, step counts above 2^53).
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/test_helpers.hpp.
#include <catch2/catch.hpp>

#include <limits>
#include <memory>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// An Adam over one (2, 3) parameter "w", stepped once, and its state dict.
struct SteppedAdam {
    Tensor w = from_array(xt::zeros<real>({2, 3}), true);
    optim::Adam opt{NamedTensors{{"w", w}}, optim::AdamOptions(0.01)};
    SteppedAdam() {
        w.set_grad(Tensor({{1, 2, 3}, {4, 5, 6}}));
        opt.step();
    }
};

void require_same_state(const optim::OptimizerState& a, const optim::OptimizerState& b) {
    REQUIRE(a.metadata == b.metadata);
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        REQUIRE(a.tensors[i].first == b.tensors[i].first);
        REQUIRE(bits_equal(a.tensors[i].second.data(), b.tensors[i].second.data()));
    }
}

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
    require_same_state(opt_a->state_dict(), opt_b->state_dict());
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

TEST_CASE("state_buffers: state_dict's names and order, pointing at the live buffers (state_dict copies them)",
          "[optim][state]") {
    TinyModel m;
    optim::Adam opt(m.params(), optim::AdamOptions(0.01));
    m.set_grads(1, true);
    opt.step();
    const optim::OptimizerState copy = opt.state_dict();
    const auto live = opt.state_buffers();
    REQUIRE(live.size() == copy.tensors.size());
    for (std::size_t i = 0; i < live.size(); ++i) {
        INFO(live[i].first);
        CHECK(live[i].first == copy.tensors[i].first);
        CHECK(exactly_equal(*live[i].second, copy.tensors[i].second.data()));
    }
    REQUIRE(live[0].first == "emb.weight.exp_avg");
    CHECK(live[0].second == &opt.state_of("emb.weight")->exp_avg);  // the buffer itself, not a copy
    m.set_grads(2, true);
    opt.step();  // changes the buffers, so the live view, not the copy
    CHECK(exactly_equal(*live[0].second, opt.state_of("emb.weight")->exp_avg));
    CHECK_FALSE(exactly_equal(*live[0].second, copy.tensors[0].second.data()));
}

TEST_CASE("load_state_dict rejects mismatches with clear messages and changes nothing",
          "[optim][state][errors]") {
    Tensor w = make_param({2, 3});
    optim::Adam opt(NamedTensors{{"w", w}}, optim::AdamOptions(0.01));
    w.set_grad(from_array(grad_at(1, {2, 3})));
    opt.step();
    const auto good = opt.state_dict();

    auto require_untouched = [&] { require_same_state(opt.state_dict(), good); };

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

TEST_CASE("load_state_dict refuses a negative second moment and a non-finite buffer, naming it",
          "[optim][state][errors][regression]") {
    Tensor w = make_param({2, 3});
    optim::Adam opt(NamedTensors{{"w", w}}, optim::AdamOptions(0.01).amsgrad(true));
    w.set_grad(from_array(grad_at(1, {2, 3})));
    opt.step();
    const auto good = opt.state_dict();
    // The state with element 4 of one buffer set to v (a fresh copy: the saved state stays good).
    auto with = [&](const std::string& buffer, real v) {
        optim::OptimizerState bad = good;
        for (auto& [name, t] : bad.tensors) {
            if (name != buffer) continue;
            Array a = t.data();
            a.data()[4] = v;
            t = from_array(std::move(a));
        }
        return bad;
    };
    const real nan = std::numeric_limits<real>::quiet_NaN(), inf = std::numeric_limits<real>::infinity();
    require_value_error([&] { opt.load_state_dict(with("w.exp_avg_sq", -1)); },
                        "'w.exp_avg_sq' holds -1 at element 4: a second moment (a mean of squares) is >= 0");
    require_value_error([&] { opt.load_state_dict(with("w.max_exp_avg_sq", -0.5)); }, "'w.max_exp_avg_sq' holds -0.5");
    require_value_error([&] { opt.load_state_dict(with("w.exp_avg", nan)); }, "'w.exp_avg' holds nan at element 4");
    require_value_error([&] { opt.load_state_dict(with("w.exp_avg_sq", inf)); }, "'w.exp_avg_sq' holds inf");
    require_same_state(opt.state_dict(), good);
    opt.load_state_dict(with("w.exp_avg", -3));  // a first moment may be negative
    CHECK(opt.state_dict().tensors[0].second.data().data()[4] == -3);
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

TEST_CASE("ckpt bug 9: the optimizer refuses lr 0x10 and step counts with a + or spaces",
          "[ckpt][optim][parse][regression]") {
    SteppedAdam a;
    const optim::OptimizerState good = a.opt.state_dict();
    REQUIRE(good.metadata.at("w.step") == "1");
    const struct {
        const char* key;
        const char* value;
    } cases[] = {{"group.0.lr", "0x10"},  {"group.0.lr", " 0.01"},  {"group.0.lr", "0.01 "},
                 {"group.0.lr", "+0.01"}, {"group.0.weight_decay", "0abc"},
                 {"w.step", "+1"},        {"w.step", " 1"},          {"w.step", "1 "},
                 {"w.step", "1e0"},       {"w.step", "0x1"},         {"w.group", "+0"},
                 {"param_groups", "1abc"}, {"beta1", " 0.9"},        {"eps", "0x1p-27"}};
    for (const auto& c : cases) {
        INFO(c.key << " = '" << c.value << "'");
        optim::OptimizerState bad = good;
        bad.metadata[c.key] = c.value;
        const std::string msg = message_of<ValueError>([&] { a.opt.load_state_dict(bad); });
        CHECK_THAT(msg, Contains("Adam.load_state_dict") && Contains(c.key));
        require_same_state(a.opt.state_dict(), good);
    }
}

// =============================================================================================
// bug 2: the step count is bounded where it is read
// =============================================================================================

TEST_CASE("ckpt bug 2: an optimizer step count above 2^53 is refused on load", "[ckpt][optim][regression]") {
    SteppedAdam a;
    const optim::OptimizerState good = a.opt.state_dict();
    for (const char* step : {"9223372036854775807", "9007199254740993", "0", "-1"}) {
        INFO("w.step = " << step);
        optim::OptimizerState bad = good;
        bad.metadata["w.step"] = step;
        const std::string msg = message_of<ValueError>([&] { a.opt.load_state_dict(bad); });
        CHECK_THAT(msg, Contains("'w.step'") && Contains("9007199254740992") && Contains("2^53"));
        require_same_state(a.opt.state_dict(), good);
    }
    // The bound itself is accepted, and a step from there is finite (bias corrections 1).
    optim::OptimizerState edge = good;
    edge.metadata["w.step"] = "9007199254740992";
    a.opt.load_state_dict(edge);
    a.w.set_grad(Tensor({{1, 1, 1}, {1, 1, 1}}));
    a.opt.step();
    for (real v : a.w.data()) REQUIRE(std::isfinite(v));
}

TEST_CASE("step() refuses a parameter resized after its state was made, naming it, and changes nothing",
          "[optim][regression]") {
    Tensor p = zeros({4}, true);
    optim::Adam opt({{"p", p}}, optim::AdamOptions(0.1));
    p.set_grad(ones({4}));
    opt.step();  // exp_avg and exp_avg_sq are (4,) now
    p.set_data(zeros({1 << 20}).data());
    p.set_grad(ones({1 << 20}));
    REQUIRE_THROWS_WITH(opt.step(), Contains("Adam.step") && Contains("'p'") && Contains("(1048576)") &&
                                        Contains("exp_avg") && Contains("(4)"));
    REQUIRE(xt::all(xt::equal(p.data(), real(0))));  // untouched

    nn::Linear fc(3, 2);  // a module parameter resized through mutable_data(): named by the module
    optim::SGD sgd(fc.named_parameters(), optim::SGDOptions(0.1).momentum(0.9));
    fc.weight.mutable_data() = zeros({2, 5}).data();
    REQUIRE_THROWS_WITH(sgd.step(), Contains("SGD.step") && Contains("parameter 'weight'") &&
                                        Contains("(2, 3)") && Contains("(2, 5)"));
}

TEST_CASE("a NaN lr or weight_decay in a param group is refused, not taken as 'unset'", "[optim][regression]") {
    Tensor a = ones({2}, true);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    REQUIRE_THROWS_WITH(optim::SGD({optim::ParamGroup{{{"a", a}}, nan}}, optim::SGDOptions(0.1)),
                        Contains("SGD") && Contains("learning rate nan"));
    REQUIRE_THROWS_WITH(optim::AdamW({optim::ParamGroup{{{"a", a}}, 0.1, nan}}, optim::AdamWOptions(0.1)),
                        Contains("AdamW") && Contains("weight_decay nan"));
    optim::AdamW opt({optim::ParamGroup{{{"a", a}}}}, optim::AdamWOptions(0.1).weight_decay(0.5));
    REQUIRE(*opt.param_groups()[0].lr == 0.1);  // empty fields come from the options
    REQUIRE(*opt.param_groups()[0].weight_decay == 0.5);
    opt.param_groups()[0].weight_decay = nan;    // a scheduler's or user's NaN is refused at step()
    a.set_grad(ones({2}));
    REQUIRE_THROWS_WITH(opt.step(), Contains("AdamW.step") && Contains("weight_decay nan"));
}

TEST_CASE("Module::zero_grad(false) and Optimizer::zero_grad(false) both keep a row-sparse gradient with 0 rows",
          "[optim][sparse][regression]") {
    // Two equal sparse tables, each with lazy Adam; one zeroed through the module, one through the
    // optimizer. A zeroed gradient stays a gradient (PyTorch's zero_()), so the next step() counts
    // the same t for both and their weights stay equal.
    auto make = [] {
        manual_seed(5);
        return std::make_shared<nn::Embedding>(6, 3, nn::EmbeddingOptions().sparse(true));
    };
    auto a = make(), b = make();
    optim::Adam opt_a(a->named_parameters(), optim::AdamOptions(0.1)), opt_b(b->named_parameters(), optim::AdamOptions(0.1));
    for (int step = 0; step < 3; ++step) {
        a->zero_grad(false);
        opt_b.zero_grad(false);
        if (step != 1) {  // step 1: no lookup, both gradients stay zeroed with k = 0 rows
            a->forward(IndexTensor{1, 4}).sum().backward();
            b->forward(IndexTensor{1, 4}).sum().backward();
        }
        REQUIRE(a->weight.sparse_grad() != nullptr);
        REQUIRE(b->weight.sparse_grad() != nullptr);
        REQUIRE(a->weight.sparse_grad()->indices == b->weight.sparse_grad()->indices);
        opt_a.step();
        opt_b.step();
    }
    REQUIRE(bits_equal(a->weight, b->weight));
    REQUIRE(opt_a.state_dict().metadata == opt_b.state_dict().metadata);
}

// LibTorch's idiom, torch::optim::AdamW(model->parameters(), options): the tensors alone, named
// as named_parameters() names them, so the state dict and the steps are the named form's; a
// tensor no module registered is "param.<i>".
namespace {
template <class Opt, class Options>
void check_parameters_idiom(const Options& options) {
    TinyNet by_tensors, by_names;  // emb.weight (5, 3), fc.weight (2, 3), fc.bias (2,)
    by_names.load_state_dict(by_tensors.state_dict());
    Opt a(by_tensors.parameters(), options), b(by_names.named_parameters(), options);
    const IndexTensor ids({0, 3, 3, 1});
    for (int step = 0; step < 3; ++step) {
        for (auto [net, opt] : {std::pair<TinyNet*, optim::Optimizer*>{&by_tensors, &a}, {&by_names, &b}}) {
            const Tensor y = net->forward(ids);
            opt->zero_grad();
            sum(mul(y, y)).backward();
            opt->step();
        }
    }
    CHECK(names_of(a.param_groups()[0].params) == std::vector<std::string>{"emb.weight", "fc.weight", "fc.bias"});
    CHECK(a.state_dict().tensors.size() == 3 * b.state_buffer_names().size());  // every parameter stepped
    require_same_state(a.state_dict(), b.state_dict());
    const NamedTensors pa = by_tensors.named_parameters(), pb = by_names.named_parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) CHECK(bits_equal(pa[i].second.data(), pb[i].second.data()));
}
}  // namespace

TEST_CASE("SGD, Adam and AdamW take model.parameters() and step as with named_parameters()", "[optim][regression]") {
    check_parameters_idiom<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9));
    check_parameters_idiom<optim::Adam>(optim::AdamOptions(0.01));
    check_parameters_idiom<optim::AdamW>(optim::AdamWOptions(0.01));
    // Leaves of no module, and one tensor named twice (a second model's "fc.weight"): by index.
    TinyNet other;
    const Tensor loose = from_array(xt::zeros<real>({2}), true);
    optim::AdamW opt(std::vector<Tensor>{loose, other.fc->weight, TinyNet().fc->weight});
    CHECK(names_of(opt.param_groups()[0].params) == std::vector<std::string>{"param.0", "fc.weight", "param.2"});
}
