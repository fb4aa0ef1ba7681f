// tests/optim/test_lr_scheduler.cpp — optim::CosineWithWarmup: linear warmup, cosine decay to min_lr.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/test_helpers.hpp.
#include <catch2/catch.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

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
