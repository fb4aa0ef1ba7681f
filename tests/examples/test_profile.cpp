// tests/examples/test_profile.cpp — examples/common/profile: the op categories of events, the time
// by category (the profiling thread's self times, a worker's left out), the peak's line (the
// allocating event and its regions), the window check of --profile N, and a window of steps run
// through StepProfile (its files). The programs' --profile runs are tests/profile_examples.sh.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "common/profile.hpp"
#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

namespace test_examples_profile {  // a namespace of its own: the unity build puts files together
using namespace xgrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
using profiler::Event;
using profiler::Kind;

Event event(const std::string& name, Kind kind, std::int64_t self_ns = 0, int thread = 0, std::int64_t parent = -1) {
    Event e;
    e.name = name;
    e.kind = kind;
    e.self_ns = self_ns;
    e.duration_ns = self_ns;
    e.thread = thread;
    e.parent = parent;
    return e;
}

TEST_CASE("op_category: an op and its backward closure by the op's name, the rest by kind", "[examples_common][profile]") {
    CHECK(examples::op_category(event("matmul", Kind::op)) == "products");
    CHECK(examples::op_category(event("tiled_causal_attention backward", Kind::backward)) == "products");
    CHECK(examples::op_category(event("lora_linear", Kind::op)) == "products");
    CHECK(examples::op_category(event("fused_causal_attention_packed backward", Kind::backward)) == "products");
    CHECK(examples::op_category(event("gelu backward", Kind::backward)) == "elementwise");
    CHECK(examples::op_category(event("add", Kind::op)) == "elementwise");
    CHECK(examples::op_category(event("layer_norm", Kind::op)) == "softmax, norms, reductions");
    CHECK(examples::op_category(event("softmax backward", Kind::backward)) == "softmax, norms, reductions");
    CHECK(examples::op_category(event("cross_entropy backward", Kind::backward)) == "embedding, loss");
    CHECK(examples::op_category(event("embedding", Kind::op)) == "embedding, loss");
    CHECK(examples::op_category(event("reshape", Kind::op)) == "shapes, copies, other ops");
    CHECK(examples::op_category(event("an op not listed", Kind::op)) == "shapes, copies, other ops");
    CHECK(examples::op_category(event("accumulate_grad", Kind::engine)) == "backward engine");
    CHECK(examples::op_category(event("AdamW.step", Kind::optimizer)) == "optimizer");
    CHECK(examples::op_category(event("all_reduce", Kind::collective)) == "communication");
    CHECK(examples::op_category(event("block 3", Kind::user)) == "other (between ops)");
    CHECK(examples::op_category(event("ProfilerStep#0", Kind::step)) == "other (between ops)");
    CHECK(examples::op_category(event("matmul", Kind::worker)).empty());  // beside its caller, not in the step
    CHECK(examples::op_categories().size() == 9);
}

TEST_CASE("time_by_category sums the profiling thread's self times, a worker's share left out",
          "[examples_common][profile]") {
    profiler::Profile p;
    p.events = {event("ProfilerStep#0", Kind::step, 100), event("matmul", Kind::op, 300, 0, 0),
                event("matmul backward", Kind::backward, 250, 0, 0), event("AdamW.step", Kind::optimizer, 50, 0, 0),
                event("matmul", Kind::worker, 1000, 1), event("gelu", Kind::op, 7, 1)};
    p.wall_ns = 700;
    const std::vector<double> s = examples::time_by_category(p);
    REQUIRE(s.size() == 9);
    CHECK(s[0] == Approx(550e-9));  // products: matmul and its backward
    CHECK(s[1] == 0);               // the gelu ran on another thread
    CHECK(s[6] == Approx(50e-9));   // optimizer
    CHECK(s[8] == Approx(100e-9));  // between ops: the step's own time
    double total = 0;
    for (double x : s) total += x;
    CHECK(total == Approx(700e-9));
    p.wall_ns = 760;  // 60 ns before the first event opened: between ops too
    CHECK(examples::time_by_category(p)[8] == Approx(160e-9));
}

TEST_CASE("peak_line names the allocating event, its regions and its step", "[examples_common][profile]") {
    profiler::Profile p;
    p.events = {event("ProfilerStep#1", Kind::step), event("forward + loss", Kind::user, 0, 0, 0),
                event("block 3", Kind::user, 0, 0, 1), event("gelu", Kind::op, 0, 0, 2)};
    p.memory = {{1'000'000, 1 << 20, 3}, {2'500'000, 3 << 20, 3}, {3'000'000, 2 << 20, 2}};
    CHECK(examples::peak_line(p) == "peak 3.00 MiB live in Arrays, 2.50 ms into the profile (ProfilerStep#1), "
                                    "allocated by gelu in block 3 in forward + loss");
    p.memory = {{10, 5 << 20, -1}};
    CHECK(examples::peak_line(p) == "peak 5.00 MiB live in Arrays, 0.00 ms into the profile, allocated by outside every event");
    p.memory.clear();
    CHECK_THAT(examples::peak_line(p), Contains("no memory samples"));
}

TEST_CASE("check_profile_window: the warm-up and N steps must fit in the run", "[examples_common][profile]") {
    CHECK_NOTHROW(examples::check_profile_window(0, 0, 0, "--steps"));  // off
    CHECK_NOTHROW(examples::check_profile_window(2, 0, 7, "--steps"));  // steps 6 and 7
    CHECK_NOTHROW(examples::check_profile_window(2, 100, 107, "--steps"));
    try {
        examples::check_profile_window(2, 100, 106, "--stop-after");
        FAIL("a window past the run's end was accepted");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()) == "--profile 2 profiles steps 106..107 of this run, after 5 warm-up steps, but "
                                       "the run takes 6 steps (101..106): give --stop-after room for 7 steps, or lower --profile");
    }
}

TEST_CASE("check_profile_window refuses a negative N, and an N too large to add to the warm-up",
          "[examples_common][profile][regression]") {
    REQUIRE_THROWS_WITH(examples::check_profile_window(-1, 0, 100, "--steps"),
                        Contains("--profile -1") && Contains("0 (off) or more"));
    REQUIRE_THROWS_WITH(examples::check_profile_window(2147483647, 0, 100, "--steps"),
                        Contains("--profile 2147483647 profiles steps 6..2147483652 of this run"));
}

TEST_CASE("StepProfile profiles its window alone and writes the trace and the picture's data",
          "[examples_common][profile]") {
    const fs::path dir = fs::temp_directory_path() / ("xgrad_step_profile_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    manual_seed(3);
    nn::Linear layer(8, 4);
    const Tensor x = randn({16, 8});
    {
        examples::StepProfile profile(2, 0, 9, dir.string());
        for (int step = 0; step < 9; ++step) {
            profile.begin_step(step);
            CHECK(profiler::detail::active() == (step >= 5 && step <= 6));
            layer.forward(x).sum().backward();
            profile.end_step(step);
        }
    }
    CHECK_FALSE(profiler::detail::active());
    std::ifstream trace(dir / "trace.json");
    const nlohmann::json j = nlohmann::json::parse(trace);
    int steps = 0, backward = 0;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] != "X") continue;
        steps += e["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0;
        backward += e["name"] == "backward";
    }
    CHECK(steps == 2);     // steps 6 and 7 (1-based), nothing of the other 7
    CHECK(backward == 2);  // one engine pass a step
    std::ifstream time(dir / "profile_time.tsv");
    std::string header, line;
    std::getline(time, header);
    int rows = 0;
    while (std::getline(time, line)) ++rows;
    CHECK(rows == 9);  // one a category
    CHECK(fs::file_size(dir / "profile_memory.tsv") > 0);
    fs::remove_all(dir);
}

}  // namespace test_examples_profile
