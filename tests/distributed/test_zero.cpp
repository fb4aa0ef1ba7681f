// tests/distributed/test_zero.cpp — ZeroRedundancyOptimizer: the owners, the reduce-scatter by
// hand, the claim of distributed/README.md (stages 1 and 2 take DDP's steps), the memory each rank
// keeps, the bytes sent, the whole state gathered for a checkpoint and loaded back, and the
// refusals, which every rank raises alike.
//
// Like test_ddp.cpp, the equivalence tests need no second program: every rank trains a DDP copy
// and a ZeRO copy of the model on its slice of the same batches and compares them. Run at W = 1
// (the binary alone), 2 (shared memory and TCP), 3 and 4 (ctest's distributed_* tests).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include <xgrad/distributed/ddp.hpp>
#include <xgrad/distributed/zero.hpp>

#include "examples/gpt/data.hpp"
#include "examples/gpt/model.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;
using xgrad::testing::require_values;

namespace {

// Four parameters of 10, 6, 5 and 4 elements, in that order.
struct FourParams : nn::Module {
    Tensor a, b, c, d;
    FourParams() {
        a = register_parameter("a", xgrad::zeros({10}));
        b = register_parameter("b", xgrad::zeros({2, 3}));
        c = register_parameter("c", xgrad::zeros({5}));
        d = register_parameter("d", xgrad::zeros({4}));
    }
};

// The largest relative difference |x − y| / max(|y|, 1e-30) over two lists of numbers.
double worst_relative(const std::vector<double>& x, const std::vector<double>& y) {
    REQUIRE(x.size() == y.size());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(std::abs(y[i]), 1e-30));
    return worst;
}

std::vector<double> values_of(const nn::Module& m) {
    std::vector<double> v;
    for (const auto& [name, p] : m.named_parameters()) v.insert(v.end(), p.data().begin(), p.data().end());
    return v;
}

// This rank's share of `rows` offsets: the W equal slices of data parallelism.
std::vector<std::size_t> my_slice(const std::vector<std::size_t>& rows) {
    const std::size_t n = rows.size() / std::size_t(dist::world_size()), at = n * std::size_t(dist::rank());
    return {rows.begin() + std::ptrdiff_t(at), rows.begin() + std::ptrdiff_t(at + n)};
}

gpt::GPTConfig tiny_gpt() {
    gpt::GPTConfig c;
    c.vocab = 11;
    c.block = 8;
    c.n_layer = 1;
    c.n_head = 2;
    c.d = 16;
    c.bias = false;  // the key bias's gradient is rounding noise (test_ddp.cpp says why)
    return c;
}

struct Trajectory {
    std::vector<double> losses, params;
    std::size_t ddp_bytes = 0, reduced_bytes = 0, gathered_bytes = 0;
};

// `steps` AdamW steps of the tiny GPT on this rank's slices, clipped at norm 1: with DDP
// (stage 0) or with ZeRO at `stage`.
Trajectory train_gpt(int stage, int steps) {
    const int W = dist::world_size(), B = 4 * W;
    const gpt::GPTConfig c = tiny_gpt();
    gpt::Ids text(400);
    std::mt19937_64 text_rng(3);
    for (auto& id : text) id = std::int64_t(text_rng() % 11);
    manual_seed(7);
    gpt::GPT model(c);
    auto opt = gpt::make_adamw(model, 1e-2, 0.9, 0.99, 0.1);
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
    if (stage == 0) ddp = std::make_unique<dist::DistributedDataParallel>(model);
    else zero = std::make_unique<dist::ZeroRedundancyOptimizer>(model, *opt, dist::ZeroOptions().stage(stage));
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<std::size_t> pick(0, text.size() - std::size_t(c.block) - 1);
    Trajectory out;
    for (int step = 0; step < steps; ++step) {
        std::vector<std::size_t> offsets(static_cast<std::size_t>(B));
        for (auto& o : offsets) o = pick(rng);
        const gpt::Batch mine = gpt::windows(text, my_slice(offsets), int(c.block));
        opt->zero_grad();
        Tensor loss = nn::functional::cross_entropy(model.forward(mine.x), mine.y);
        loss.backward();
        if (ddp) {
            ddp->sync_gradients();
            optim::clip_grad_norm_(model.named_parameters(), 1.0);
            opt->step();
            out.ddp_bytes = ddp->last_sync().dense_bytes;
        } else {
            zero->reduce_scatter_gradients();
            zero->clip_grad_norm_(1.0);
            zero->step();
            out.reduced_bytes = zero->last_step().reduced_bytes;
            out.gathered_bytes = zero->last_step().gathered_bytes;
        }
        std::vector<double> l{loss.item()};
        dist::all_reduce(l, dist::ReduceOp::Mean);
        out.losses.push_back(l[0]);
    }
    out.params = values_of(model);
    return out;
}

}  // namespace

TEST_CASE("zero: owners are whole parameters, largest first to the rank holding the fewest elements", "[distributed][zero]") {
    const int W = dist::world_size();
    FourParams m;  // 10, 6, 5, 4 elements
    optim::SGD opt(m.named_parameters(), optim::SGDOptions(0.1));
    dist::ZeroRedundancyOptimizer zero(m, opt);
    // By hand: 10 → rank 0; 6 → the least loaded; 5 → then the least loaded; 4 → likewise.
    const std::vector<std::vector<int>> expected{{0, 0, 0, 0}, {0, 1, 1, 0}, {0, 1, 2, 2}, {0, 1, 2, 3}};
    const std::vector<int> want = expected.at(std::size_t(std::min(W, 4)) - 1);
    CHECK(zero.owner(m.a) == want[0]);
    CHECK(zero.owner(m.b) == want[1]);
    CHECK(zero.owner(m.c) == want[2]);
    CHECK(zero.owner(m.d) == want[3]);
    CHECK_THROWS_WITH(zero.owner(xgrad::zeros({1})),
                      Catch::Contains("ZeroRedundancyOptimizer::owner: the tensor is not a trainable parameter"));
}

TEST_CASE("zero: the reduce-scatter leaves the mean on the owner; stage 1 zeros the others' gradients, stage 2 frees them",
          "[distributed][zero]") {
    const int stage = GENERATE(1, 2);
    const int W = dist::world_size(), r = dist::rank();
    FourParams m;
    optim::SGD opt(m.named_parameters(), optim::SGDOptions(0.5));
    dist::ZeroRedundancyOptimizer zero(m, opt, dist::ZeroOptions().stage(stage));
    // Rank r's gradient of every parameter is r + 1 in each element: the mean is (W + 1) / 2.
    for (auto& [name, p] : m.named_parameters()) set_leaf_grad(*p.impl(), Grad(Array(p.data().shape(), real(r + 1))));
    zero.reduce_scatter_gradients();
    const real mean = real(W + 1) / 2;
    for (auto& [name, p] : m.named_parameters()) {
        INFO(name << " owned by rank " << zero.owner(p) << ", stage " << stage);
        if (zero.owner(p) == r) {
            require_values(p.grad(), xgrad::full(p.shape(), mean), 0);
        } else if (stage == 1) {
            require_values(p.grad(), xgrad::zeros(p.shape()), 0);
        } else {
            CHECK_FALSE(p.has_grad());
        }
    }
    zero.step();  // θ ← 0 − 0.5 · mean on every rank: the owner's step, gathered
    for (auto& [name, p] : m.named_parameters()) require_values(p, xgrad::full(p.shape(), -0.5f * mean), 0);
    CHECK(zero.last_step().reduced_bytes == (W > 1 ? 25 * sizeof(real) : 0));
    CHECK(zero.last_step().gathered_bytes == (W > 1 ? 25 * sizeof(real) : 0));
}

TEST_CASE("zero: 200 AdamW steps of the tiny GPT at stages 1 and 2 equal DDP's, sending the same bytes",
          "[distributed][zero]") {
    const int stage = GENERATE(1, 2);
    INFO("stage " << stage << ", W " << dist::world_size());
    const Trajectory ddp = train_gpt(0, 200), zero = train_gpt(stage, 200);
    const double loss_diff = worst_relative(zero.losses, ddp.losses);
    const double param_diff = worst_relative(zero.params, ddp.params);
    // Both sum the ranks' gradients in rank order (detail::reduce_scatter_in_rank_order), and the
    // clipped norm from the same partial sums: bit for bit at any W, not merely within 1e-6.
    CHECK(loss_diff == 0);
    CHECK(param_diff == 0);
    // Ring reduce-scatter + all-gather of the same buckets send what one all-reduce sends.
    CHECK(zero.reduced_bytes == ddp.ddp_bytes);
    CHECK(zero.gathered_bytes == ddp.ddp_bytes);
}
