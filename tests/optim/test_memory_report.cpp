// tests/optim/test_memory_report.cpp — Optimizer::memory_report: exact bytes of parameters, gradients
// (dense and row-sparse) and optimizer state, the printed table and its short form (memory_summary),
// and the split of frozen (requires_grad off) and trainable parameters, as under LoRA.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...). Helpers and reference rules: tests/test_helpers.hpp.
#include <catch2/catch.hpp>

#include <filesystem>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;

static_assert(sizeof(xgrad::real) == 4, "the byte counts of the memory report are for the float32 build");

namespace {

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

TEST_CASE("memory_summary shows the largest rows first, one line for the rest, the full total", "[optim][memory]") {
    TinyModel m;
    const NamedTensors p = m.params();
    optim::Adam opt(NamedTensors(p.rbegin(), p.rend()), optim::AdamOptions(0.01));  // fc.bias first
    m.set_grads(1, /*sparse_emb=*/false);
    opt.step();
    // Bytes (param + grad + exp_avg + exp_avg_sq + step): emb.weight (50, 8) 1600 + 1600 + 3208,
    // fc.weight (4, 8) 128 + 128 + 264, fc.bias (4) 16 + 16 + 40.
    const optim::MemoryReport report = opt.memory_report();
    const std::string text = optim::memory_summary(report, 2);
    INFO(text);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    REQUIRE(lines.size() == 1 + 2 + 1 + 2 + 1 + 1 + 1 + 1);
    REQUIRE(lines[4].rfind("emb.weight ", 0) == 0);
    REQUIRE(lines[5].rfind("fc.weight ", 0) == 0);
    REQUIRE(lines[6] == "... 1 smaller tensors not shown: parameters 16 B, state 40 B");
    REQUIRE(lines[8].rfind("total ", 0) == 0);
    REQUIRE(lines[8].find(" 3512 ") != std::string::npos);  // the state of all three rows
    REQUIRE(lines[9] ==
            "parameters 1.70 KiB, gradients 1.70 KiB, optimizer state 3.43 KiB (2.01 x the parameter bytes)");
    for (std::size_t i : {2, 3, 4, 5, 7, 8}) REQUIRE(lines[i].size() == lines[1].size());
    // Room for every row: the full table, in param_groups() order.
    std::ostringstream full;
    full << report;
    REQUIRE(optim::memory_summary(report, 3) != full.str());  // sorted by size, not in group order
    REQUIRE(optim::memory_summary(report, 3).find("...") == std::string::npos);
}

namespace {
// The printed report's lines.
std::vector<std::string> lines_of(const optim::MemoryReport& report) {
    std::ostringstream os;
    os << report;
    std::vector<std::string> lines;
    std::istringstream in(os.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}
}  // namespace

TEST_CASE("memory report: a frozen parameter is marked, keeps no gradient and no state, and has its own total",
          "[optim][memory][regression]") {
    TinyModel m;
    m.emb.requires_grad_(false);  // the (50, 8) table frozen: 400 elements, 1600 B
    const Tensor emb0 = Tensor(m.emb.data());
    optim::AdamW opt(m.params(), optim::AdamWOptions(0.01).weight_decay(0.5));
    m.weight.set_grad(from_array(grad_at(1, {4, 8})));  // backward gives the trainable ones a gradient
    m.bias.set_grad(from_array(grad_at(1, {4})));
    opt.step();
    const optim::MemoryReport report = opt.memory_report();
    REQUIRE(report.rows.size() == 3);
    CHECK_FALSE(report.rows[0].trainable);
    CHECK(report.rows[1].trainable);
    CHECK(report.rows[2].trainable);
    CHECK(report.has_frozen());
    CHECK(report.rows[0].grad_bytes == 0);
    CHECK(report.rows[0].state_bytes() == 0);
    CHECK(bits_equal(m.emb, emb0));  // AdamW's decay (λ = 0.5) never reaches a tensor without a gradient

    // Trainable: fc.weight (4, 8) and fc.bias (4), 36 elements; m and v 8 B each, t 8 B per tensor.
    const optim::MemoryRow trainable = report.total_trainable();
    CHECK(trainable.name == "total trainable");
    CHECK(trainable.numel == 36);
    CHECK(trainable.param_bytes == 144);
    CHECK(trainable.grad_bytes == 144);
    CHECK(trainable.exp_avg_bytes + trainable.exp_avg_sq_bytes == 8 * 36);
    CHECK(trainable.state_bytes() == 8 * 36 + 2 * 8);
    const optim::MemoryRow frozen = report.total_frozen();
    CHECK(frozen.name == "total frozen");
    CHECK(frozen.numel == 400);
    CHECK(frozen.param_bytes == 1600);
    CHECK(frozen.grad_bytes == 0);
    CHECK(frozen.state_bytes() == 0);
    CHECK(report.total().param_bytes == trainable.param_bytes + frozen.param_bytes);
    CHECK(report.total().state_bytes() == trainable.state_bytes());

    const std::vector<std::string> lines = lines_of(report);
    const std::string text = fmt::format("{}", fmt::join(lines, "\n"));
    INFO(text);
    // title, 2 heads, rule, 3 rows, rule, total trainable, total frozen, total, 2 summary lines
    REQUIRE(lines.size() == 1 + 2 + 1 + 3 + 1 + 3 + 2);
    CHECK(lines[1].find("  trainable  ") != std::string::npos);
    const auto cells = [](const std::string& line) {
        std::vector<std::string> out;
        std::istringstream in(line);
        for (std::string c; in >> c;) out.push_back(c);
        return out;
    };
    CHECK(cells(lines[4])[0] == "emb.weight");
    CHECK(cells(lines[4])[3] == "no");   // name, shape "(50," "8)", trainable
    CHECK(cells(lines[5])[3] == "yes");  // fc.weight "(4," "8)"
    CHECK(lines[8].rfind("total trainable ", 0) == 0);
    CHECK(lines[9].rfind("total frozen ", 0) == 0);
    CHECK(lines[10].rfind("total ", 0) == 0);
    for (std::size_t i = 1; i + 2 < lines.size(); ++i) CHECK(lines[i].size() == lines[1].size());
    CHECK(lines[11] == "parameters 1.70 KiB, gradients 144 B, optimizer state 304 B (0.17 x the parameter bytes)");
    CHECK(lines[12] == "trainable 36 of 436 elements (8.26%): parameters 144 B, gradients 144 B, optimizer state "
                       "304 B; frozen 400 elements: parameters 1.56 KiB, gradients 0 B, optimizer state 0 B");

    // The adapter file's size, when the caller sets it, is one more summary line.
    optim::MemoryReport with_file = report;
    with_file.adapter_file_bytes = 2048;
    const std::vector<std::string> more = lines_of(with_file);
    REQUIRE(more.size() == lines.size() + 1);
    CHECK(more.back() == "adapter file 2.00 KiB (2048 B), 117.43% of the parameter bytes");
}

TEST_CASE("memory report of a LoRA-adapted MLP under AdamW: state 8 B per trainable element, none for the base",
          "[optim][memory][lora]") {
    // x (3, 8) → fc1 (8 → 16) → GELU → fc2 (16 → 4); r = 2 on both: A1 (2, 8), B1 (16, 2), A2 (2, 16), B2 (4, 2)
    // = 16 + 32 + 32 + 8 = 88 trainable elements; frozen W1 128 + b1 16 + W2 64 + b2 4 = 212.
    manual_seed(11);
    nn::Sequential mlp;
    mlp.push_back("fc1", std::make_shared<nn::Linear>(8, 16));
    mlp.push_back("gelu", std::make_shared<nn::GELU>());
    mlp.push_back("fc2", std::make_shared<nn::Linear>(16, 4));
    nn::apply_lora(mlp, {"fc1", "fc2"}, nn::LoRAOptions().rank(2).alpha(4));
    REQUIRE(nn::count_parameters(mlp).trainable == 88);
    REQUIRE(nn::count_parameters(mlp).frozen == 212);
    optim::AdamW opt(mlp.named_parameters());
    opt.zero_grad();
    mlp.forward(randn({3, 8})).pow(2).sum().backward();
    opt.step();
    const optim::MemoryReport report = opt.memory_report();
    for (const optim::MemoryRow& row : report.rows) {
        INFO(row.name);
        const bool adapter = row.name.find(".lora_") != std::string::npos;
        CHECK(row.trainable == adapter);
        CHECK(row.grad_bytes == (adapter ? row.param_bytes : 0));
        CHECK(row.exp_avg_bytes + row.exp_avg_sq_bytes == (adapter ? 8 * row.numel : 0));
        CHECK(row.step_bytes == (adapter ? 8u : 0u));
    }
    const optim::MemoryRow trainable = report.total_trainable(), frozen = report.total_frozen();
    CHECK(trainable.numel == 88);
    CHECK(trainable.exp_avg_bytes + trainable.exp_avg_sq_bytes == 8 * 88);
    CHECK(trainable.state_bytes() == 8 * 88 + 4 * 8);  // and one 8-byte step count per adapter tensor
    CHECK(trainable.grad_bytes == 4 * 88);
    CHECK(frozen.numel == 212);
    CHECK(frozen.param_bytes == 4 * 212);
    CHECK(frozen.grad_bytes + frozen.state_bytes() == 0);

    // The adapter's file: its tensors (4 · 88 B) and a header.
    TempDir dir;
    nn::save_adapter(mlp, dir.path.string());
    optim::MemoryReport with_file = report;
    with_file.adapter_file_bytes = std::filesystem::file_size(dir.path / "adapter_model.safetensors");
    CHECK(with_file.adapter_file_bytes > 4 * 88);
    std::ostringstream os;
    os << with_file;
    CHECK(os.str().find(fmt::format("adapter file {} ({} B)", optim::human_bytes(with_file.adapter_file_bytes),
                                    with_file.adapter_file_bytes)) != std::string::npos);
}
