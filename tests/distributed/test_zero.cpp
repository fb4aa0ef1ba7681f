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

// Rank r's gradient of every parameter of m is r + 1 in each element: the mean over the W ranks
// is (W + 1) / 2.
void give_rank_gradients(nn::Module& m) {
    for (auto& [name, p] : m.named_parameters())
        set_leaf_grad(*p.impl(), Grad(Array(p.data().shape(), real(dist::rank() + 1))));
}

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
    if (stage == 0)
        ddp = std::make_unique<dist::DistributedDataParallel>(model);
    else
        zero = std::make_unique<dist::ZeroRedundancyOptimizer>(model, *opt, dist::ZeroOptions().stage(stage));
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<std::size_t> pick(0, text.size() - std::size_t(c.block) - 1);
    Trajectory out;
    for (int step = 0; step < steps; ++step) {
        std::vector<std::size_t> offsets(static_cast<std::size_t>(B));
        for (auto& o : offsets) o = pick(rng);
        const gpt::Batch mine = gpt::windows(text, my_slice(offsets), int(c.block));
        if (ddp)
            opt->zero_grad();
        else
            zero->zero_grad();  // also starts the step over: the next reduce is its first
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
    give_rank_gradients(m);  // the mean is (W + 1) / 2
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

TEST_CASE("zero: a sparse Embedding with lazy Adam stays row-sparse on its owner and steps as DDP", "[distributed][zero]") {
    const int W = dist::world_size(), B = 6 * W, steps = 20;
    using Net = xgrad::testing::SparseTableNet;
    manual_seed(5);
    Net ref;
    manual_seed(5);
    Net net;
    optim::Adam ref_opt(ref.named_parameters(), optim::AdamOptions(0.05));
    optim::Adam opt(net.named_parameters(), optim::AdamOptions(0.05));
    dist::DistributedDataParallel ddp(ref);
    dist::ZeroRedundancyOptimizer zero(net, opt, dist::ZeroOptions().stage(2));
    std::mt19937_64 rng(2);
    for (int step = 0; step < steps; ++step) {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(B));
        for (auto& id : ids) id = std::int64_t(rng() % 40);  // a few of the 40 rows per step
        const std::size_t n = ids.size() / std::size_t(W), at = n * std::size_t(dist::rank());
        IndexArray x(ArrayShape{n}), y(ArrayShape{n});
        for (std::size_t i = 0; i < n; ++i) x(i) = ids[at + i], y(i) = ids[at + i] % 5;
        auto loss_of = [&](Net& m) { return nn::functional::cross_entropy(m.fc->forward(m.emb->forward(IndexTensor(x))), IndexTensor(y)); };
        ref_opt.zero_grad();
        loss_of(ref).backward();
        ddp.sync_gradients();
        ref_opt.step();
        zero.zero_grad();
        loss_of(net).backward();
        zero.reduce_scatter_gradients();
        if (zero.owner(net.emb->weight) == dist::rank()) REQUIRE(net.emb->weight.sparse_grad() != nullptr);
        else REQUIRE_FALSE(net.emb->weight.has_grad());
        zero.step();
        INFO("step " << step + 1);
        REQUIRE(values_of(net) == values_of(ref));  // the same rows, summed in the same order
    }
    const std::size_t table_state = 2 * 40 * 4 * sizeof(real) + 8;  // m, v dense (V, d), and t
    const optim::MemoryReport mem = zero.memory_report();
    CHECK(mem.rows[0].name == "emb.weight");
    CHECK(mem.rows[0].state_bytes_all_ranks == table_state);
    CHECK(mem.rows[0].state_bytes() == (zero.owner(net.emb->weight) == dist::rank() ? table_state : 0));
}

TEST_CASE("zero: SGD with momentum is sharded as AdamW is", "[distributed][zero]") {
    manual_seed(3);
    xgrad::testing::TinyNet ref;
    manual_seed(3);
    xgrad::testing::TinyNet net;
    optim::SGD ref_opt(ref.named_parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD opt(net.named_parameters(), optim::SGDOptions(0.1).momentum(0.9));
    dist::DistributedDataParallel ddp(ref);
    dist::ZeroRedundancyOptimizer zero(net, opt);
    for (int step = 0; step < 5; ++step) {
        IndexArray ids(ArrayShape{2});
        ids(0) = (dist::rank() + step) % 5;
        ids(1) = (2 * dist::rank() + 1) % 5;
        ref_opt.zero_grad();
        ref.forward(IndexTensor(ids)).sum().backward();
        ddp.sync_gradients();
        ref_opt.step();
        zero.zero_grad();
        net.forward(IndexTensor(ids)).sum().backward();
        zero.reduce_scatter_gradients();
        zero.step();
        REQUIRE(values_of(net) == values_of(ref));
    }
    // The whole state on rank 0 is the DDP optimizer's, tensor for tensor.
    const optim::OptimizerState whole = zero.state_dict(), want = ref_opt.state_dict();
    if (dist::rank() == 0) {
        CHECK(whole.metadata == want.metadata);
        REQUIRE(whole.tensors.size() == want.tensors.size());
        for (std::size_t i = 0; i < want.tensors.size(); ++i) {
            CHECK(whole.tensors[i].first == want.tensors[i].first);
            require_values(whole.tensors[i].second, want.tensors[i].second, 0);
        }
    } else {
        CHECK(whole.tensors.empty());
        CHECK(whole.metadata.empty());
    }
}

TEST_CASE("zero: each rank keeps the state of its own parameters; stage 2 their gradients only", "[distributed][zero]") {
    const int stage = GENERATE(1, 2);
    const int W = dist::world_size(), r = dist::rank();
    manual_seed(7);
    gpt::GPT model(tiny_gpt());
    auto opt = gpt::make_adamw(model, 1e-2, 0.9, 0.99, 0.1);
    dist::ZeroRedundancyOptimizer zero(model, *opt, dist::ZeroOptions().stage(stage));
    const IndexArray x = xt::ones<std::int64_t>(ArrayShape{2, 8});
    zero.zero_grad();
    nn::functional::cross_entropy(model.forward(IndexTensor(x)), IndexTensor(x)).backward();
    zero.reduce_scatter_gradients();
    zero.step();
    const optim::MemoryReport mem = zero.memory_report();
    std::size_t mine = 0, all = 0, grads = 0, largest = 0, numel = 0;
    for (const optim::MemoryRow& row : mem.rows) {
        INFO(row.name);
        const std::size_t adamw = 2 * row.numel * sizeof(real) + 8;  // m, v and t
        CHECK(row.state_bytes() == (row.owner == r ? adamw : 0));
        CHECK(row.state_bytes_all_ranks == adamw);
        const bool holds_grad = stage == 1 || row.owner == r;
        CHECK(row.grad_bytes == (holds_grad ? row.numel * sizeof(real) : 0));
        mine += row.state_bytes(), all += adamw, grads += row.grad_bytes;
        largest = std::max(largest, adamw);
        numel += row.numel;
    }
    // Every parameter has its row, and 1/W of DDP's state is here, give or take one parameter
    // tensor (the shards are whole tensors).
    std::size_t params = 0;
    for (const auto& named : model.named_parameters()) params += std::size_t(named.second.numel());
    CHECK(numel == params);
    CHECK(std::abs(double(mine) - double(all) / W) <= double(largest));
    CHECK(mem.total().state_bytes_all_ranks == all);
    std::ostringstream printed;
    printed << mem;
    CHECK_THAT(printed.str(), Catch::Contains(fmt::format("AdamW optimizer memory on rank {} of {} (ZeRO stage {}", r, W, stage)) &&
                              Catch::Contains("state, all ranks"));
}

TEST_CASE("zero: a state saved at W ranks loads at any W and continues as DDP does", "[distributed][zero]") {
    // A one-process state (here DDP's, whole on every rank) loaded into a ZeRO run, then 5 steps each.
    manual_seed(7);
    gpt::GPT ref(tiny_gpt());
    manual_seed(7);
    gpt::GPT model(tiny_gpt());
    auto ref_opt = gpt::make_adamw(ref, 1e-2, 0.9, 0.99, 0.1);
    auto opt = gpt::make_adamw(model, 1e-2, 0.9, 0.99, 0.1);
    dist::DistributedDataParallel ddp(ref);
    dist::ZeroRedundancyOptimizer zero(model, *opt, dist::ZeroOptions().stage(2));
    IndexArray x(ArrayShape{2, 8});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::int64_t((i * 7 + std::size_t(dist::rank())) % 11);
    auto ddp_step = [&] {
        ref_opt->zero_grad();
        nn::functional::cross_entropy(ref.forward(IndexTensor(x)), IndexTensor(x)).backward();
        ddp.sync_gradients();
        ref_opt->step();
    };
    for (int i = 0; i < 3; ++i) ddp_step();
    model.load_state_dict(ref.state_dict());
    zero.load_state_dict(ref_opt->state_dict());
    for (int i = 0; i < 5; ++i) {
        ddp_step();
        zero.zero_grad();
        nn::functional::cross_entropy(model.forward(IndexTensor(x)), IndexTensor(x)).backward();
        zero.reduce_scatter_gradients();
        zero.step();
        REQUIRE(values_of(model) == values_of(ref));
    }
    const optim::OptimizerState whole = zero.state_dict(), want = ref_opt->state_dict();
    if (dist::rank() == 0) {
        CHECK(whole.metadata == want.metadata);
        REQUIRE(whole.tensors.size() == want.tensors.size());
        for (std::size_t i = 0; i < want.tensors.size(); ++i) require_values(whole.tensors[i].second, want.tensors[i].second, 0);
    }
}

TEST_CASE("zero: a state refused on one rank is refused on every rank, and no rank keeps it", "[distributed][zero]") {
    const int W = dist::world_size();
    manual_seed(7);
    gpt::GPT model(tiny_gpt());
    auto opt = gpt::make_adamw(model, 1e-2, 0.9, 0.99, 0.1);
    dist::ZeroRedundancyOptimizer zero(model, *opt);
    const IndexArray x = xt::ones<std::int64_t>(ArrayShape{2, 8});
    zero.zero_grad();
    nn::functional::cross_entropy(model.forward(IndexTensor(x)), IndexTensor(x)).backward();
    zero.reduce_scatter_gradients();
    zero.step();
    std::string victim;  // a parameter of the last rank's
    for (const auto& [name, p] : model.named_parameters())
        if (zero.owner(p) == W - 1) victim = name;
    REQUIRE(!victim.empty());
    const optim::OptimizerState good = opt->state_dict();  // this rank's part, before
    // A whole state on every rank (a one-process run's), with a NaN in the victim's first moment.
    manual_seed(7);
    gpt::GPT whole_model(tiny_gpt());
    auto whole_opt = gpt::make_adamw(whole_model, 1e-2, 0.9, 0.99, 0.1);
    whole_opt->zero_grad();
    nn::functional::cross_entropy(whole_model.forward(IndexTensor(x)), IndexTensor(x)).backward();
    whole_opt->step();
    optim::OptimizerState bad = whole_opt->state_dict();
    for (auto& [name, t] : bad.tensors)
        if (name == victim + ".exp_avg") t.mutable_data().data()[0] = std::numeric_limits<real>::quiet_NaN();
    CHECK_THROWS_WITH(zero.load_state_dict(bad),
                      Catch::Contains(W > 1 ? fmt::format("ZeroRedundancyOptimizer::load_state_dict: refused on rank {}", W - 1)
                                            : std::string("AdamW.load_state_dict")) &&
                          Catch::Contains(victim + ".exp_avg' holds nan"));
    const optim::OptimizerState after = opt->state_dict();
    REQUIRE(after.tensors.size() == good.tensors.size());
    for (std::size_t i = 0; i < good.tensors.size(); ++i) require_values(after.tensors[i].second, good.tensors[i].second, 0);
    CHECK(after.metadata == good.metadata);
}

TEST_CASE("zero: misuse is refused on every rank with the call to make", "[distributed][zero]") {
    FourParams m;
    optim::AdamW opt(m.named_parameters(), optim::AdamWOptions(0.1));
    CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, opt, dist::ZeroOptions().stage(3)),
                      Catch::Contains("ZeroRedundancyOptimizer: stage must be 1 (the optimizer state sharded) or 2 "
                                      "(the gradients too), got 3"));
    CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, opt, dist::ZeroOptions().bucket_bytes(0)),
                      Catch::Contains("bucket_bytes must be positive, got 0"));
    optim::AdamW partial(NamedTensors{{"a", m.a}}, optim::AdamWOptions(0.1));
    CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, partial),
                      Catch::Contains("the module's parameter 'b' is not in the optimizer, so no rank would step it"));
    dist::ZeroRedundancyOptimizer zero(m, opt);
    for (auto& [name, p] : m.named_parameters()) set_leaf_grad(*p.impl(), Grad(Array(p.data().shape(), real(1))));
    CHECK_THROWS_WITH(zero.clip_grad_norm_(1.0), Catch::Contains("ZeroRedundancyOptimizer::clip_grad_norm_: call "
                                                                 "reduce_scatter_gradients() first"));
    CHECK_THROWS_WITH(zero.step(), Catch::Contains("ZeroRedundancyOptimizer::step: call reduce_scatter_gradients() "
                                                   "after backward and before step()"));
    zero.reduce_scatter_gradients();
    CHECK(zero.clip_grad_norm_(1.0) == Approx(5.0));  // ‖G‖ of 25 ones, the mean over the ranks
    zero.step();
    CHECK_THROWS_WITH(zero.step(), Catch::Contains("call reduce_scatter_gradients()"));  // once per reduce
    if (dist::world_size() > 1) {  // rank 1's optimizer lacks parameters: refused on every rank, naming rank 1
        optim::AdamW mixed(dist::rank() == 1 ? NamedTensors{{"a", m.a}} : m.named_parameters(), optim::AdamWOptions(0.1));
        CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, mixed),
                          Catch::Contains("the module's parameter 'b' is not in the optimizer") &&
                              Catch::Contains("(on rank 1)"));
    }
    if (dist::world_size() > 1) {  // ranks that disagree on the stage
        CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, opt, dist::ZeroOptions().stage(dist::rank() == 0 ? 1 : 2)),
                          Catch::Contains("ZeroRedundancyOptimizer: the model (element type, parameters, buffers, "
                                          "bucket_bytes, stage, optimizer): rank") &&
                              Catch::Contains("'stage 2' on rank 1 and 'stage 1' on rank 0"));
    }
}

TEST_CASE("zero: a second reduce_scatter_gradients() before step() is refused, since it would divide the mean by W again",
          "[distributed][zero]") {
    const int stage = GENERATE(1, 2);
    const int W = dist::world_size();
    FourParams m;
    optim::SGD opt(m.named_parameters(), optim::SGDOptions(0.5));
    dist::ZeroRedundancyOptimizer zero(m, opt, dist::ZeroOptions().stage(stage));
    give_rank_gradients(m);  // the mean is (W + 1) / 2
    zero.reduce_scatter_gradients();
    CHECK_THROWS_WITH(zero.reduce_scatter_gradients(),
                      Catch::Contains("ZeroRedundancyOptimizer::reduce_scatter_gradients: called again before step() "
                                      "or zero_grad()"));
    // zero_grad() starts the step over: the next reduce is the first again.
    zero.zero_grad();
    give_rank_gradients(m);
    zero.reduce_scatter_gradients();
    zero.step();  // θ ← 0 − 0.5 · mean
    const real mean = real(W + 1) / 2;
    for (auto& [name, p] : m.named_parameters()) require_values(p, xgrad::full(p.shape(), -0.5f * mean), 0);
}

TEST_CASE("zero: an optimizer's parameter no bucket holds is refused by name: frozen, or added to the optimizer since",
          "[distributed][zero]") {
    FourParams m;
    m.d.requires_grad_(false);
    optim::Adam with_frozen(m.named_parameters(), optim::AdamOptions(1.0));  // fine for one process
    CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(m, with_frozen),
                      Catch::Contains("ZeroRedundancyOptimizer: the optimizer's parameter 'd' is frozen "
                                      "(requires_grad false) in the module"));
    m.d.requires_grad_(true);
    optim::Adam opt(m.named_parameters(), optim::AdamOptions(1.0));
    dist::ZeroRedundancyOptimizer zero(m, opt);
    optim::ParamGroup extra;
    extra.params.emplace_back("extra", Tensor(xgrad::zeros({2})).requires_grad_(true));
    opt.add_param_group(extra);
    for (auto& [name, p] : m.named_parameters()) set_leaf_grad(*p.impl(), Grad(Array(p.data().shape(), real(1))));
    zero.reduce_scatter_gradients();
    const std::string added = "the optimizer's parameter 'extra' is not a parameter of the module";
    CHECK_THROWS_WITH(zero.step(), Catch::Contains("ZeroRedundancyOptimizer::step: " + added));
    CHECK_THROWS_WITH(zero.state_dict(), Catch::Contains("ZeroRedundancyOptimizer::state_dict: " + added));
    CHECK_THROWS_WITH(zero.load_state_dict(opt.state_dict()),
                      Catch::Contains("ZeroRedundancyOptimizer::load_state_dict: " + added));
    CHECK_THROWS_WITH(zero.memory_report(), Catch::Contains("ZeroRedundancyOptimizer::memory_report: " + added));
    for (auto& [name, p] : m.named_parameters()) CHECK(p.data()(0) == 0.0f);  // no rank stepped
}

TEST_CASE("zero: amsgrad, two param groups of different lr, kept gradients and one bucket per parameter step as DDP",
          "[distributed][zero]") {
    const int stage = GENERATE(1, 2);
    auto groups = [](const nn::Module& m) {  // the table at lr 0.05, the head at 0.2
        optim::ParamGroup table, head;
        head.lr = 0.2;
        for (const auto& [name, p] : m.named_parameters()) (name == "emb.weight" ? table : head).params.emplace_back(name, p);
        return std::vector<optim::ParamGroup>{table, head};
    };
    manual_seed(3);
    xgrad::testing::TinyNet ref;
    manual_seed(3);
    xgrad::testing::TinyNet net;
    optim::Adam ref_opt(groups(ref), optim::AdamOptions(0.05).amsgrad(true));
    optim::Adam opt(groups(net), optim::AdamOptions(0.05).amsgrad(true));
    dist::DistributedDataParallel ddp(ref);
    dist::ZeroRedundancyOptimizer zero(net, opt, dist::ZeroOptions().stage(stage).bucket_bytes(1));
    for (int step = 0; step < 4; ++step) {
        IndexArray ids(ArrayShape{2});
        ids(0) = (dist::rank() + step) % 5;
        ids(1) = (3 * dist::rank() + step) % 5;
        ref_opt.zero_grad(false);
        ref.forward(IndexTensor(ids)).sum().backward();
        ddp.sync_gradients();
        ref_opt.step();
        zero.zero_grad(false);  // kept: stage 2 has freed the others' gradients, which backward makes anew
        net.forward(IndexTensor(ids)).sum().backward();
        zero.reduce_scatter_gradients();
        zero.step();
        INFO("step " << step + 1 << ", stage " << stage);
        REQUIRE(values_of(net) == values_of(ref));
    }
    const optim::OptimizerState whole = zero.state_dict(), want = ref_opt.state_dict();
    if (dist::rank() == 0) {
        CHECK(whole.metadata == want.metadata);
        REQUIRE(whole.tensors.size() == want.tensors.size());
        CHECK(whole.tensors.size() == 9);  // exp_avg, exp_avg_sq, max_exp_avg_sq of the 3 tensors
        for (std::size_t i = 0; i < want.tensors.size(); ++i) require_values(whole.tensors[i].second, want.tensors[i].second, 0);
    }
}

namespace {
// One parameter of 3 elements: at W > 1 every rank but 0 owns nothing.
struct OneParam : nn::Module {
    Tensor w;
    OneParam() { w = register_parameter("w", xgrad::zeros({3})); }
};
}  // namespace

TEST_CASE("zero: ranks that own no parameter take part in every call", "[distributed][zero]") {
    const int W = dist::world_size(), r = dist::rank();
    OneParam m;
    optim::Adam opt(m.named_parameters(), optim::AdamOptions(0.1));
    dist::ZeroRedundancyOptimizer zero(m, opt, dist::ZeroOptions().stage(2));
    CHECK(zero.owner(m.w) == 0);
    CHECK(zero.owned_parameters().size() == (r == 0 ? 1u : 0u));
    const optim::OptimizerState before = zero.state_dict();  // no step yet: the metadata alone
    if (r == 0) CHECK(before.metadata == opt.state_dict().metadata);
    CHECK(before.tensors.empty());
    CHECK(zero.memory_report().rows.at(0).state_bytes_all_ranks == 0);
    give_rank_gradients(m);  // the mean is (W + 1) / 2
    zero.reduce_scatter_gradients();
    CHECK(zero.clip_grad_norm_(100.0) == Approx(std::sqrt(3.0) * (W + 1) / 2.0));  // ‖(m, m, m)‖, m the mean
    zero.step();
    require_values(m.w, xgrad::full({3}, -0.1f), 1e-6);  // Adam's first step: −lr · sign(g)
    const optim::OptimizerState whole = zero.state_dict();
    CHECK(whole.tensors.size() == (r == 0 ? 2u : 0u));
    const optim::MemoryReport mem = zero.memory_report();
    CHECK(mem.rows.at(0).state_bytes_all_ranks == 2 * 3 * sizeof(real) + 8);  // m, v and t
    CHECK(mem.rows.at(0).state_bytes() == (r == 0 ? 2 * 3 * sizeof(real) + 8 : 0u));
}

TEST_CASE("zero: a step refused by the owner alone (a row-sparse table, SGD with momentum) is no rank's step",
          "[distributed][zero]") {
    xgrad::testing::SparseTableNet net;
    optim::SGD opt(net.named_parameters(), optim::SGDOptions(0.1).momentum(0.9));
    dist::ZeroRedundancyOptimizer zero(net, opt, dist::ZeroOptions().stage(2));
    IndexArray x(ArrayShape{2});
    x(0) = dist::rank(), x(1) = 7;
    net.fc->forward(net.emb->forward(IndexTensor(x))).sum().backward();
    zero.reduce_scatter_gradients();
    // Alone, the optimizer's own refusal; else every rank names the owner that refused.
    const std::string owner = dist::world_size() > 1 ? fmt::format("ZeroRedundancyOptimizer::step: refused on rank {}: ",
                                                                   zero.owner(net.emb->weight)) : "";
    const std::vector<double> before = values_of(net);
    CHECK_THROWS_WITH(zero.step(), Catch::StartsWith(owner + "SGD.step: 'emb.weight' has a row-sparse gradient, which SGD "
                                                     "supports only with momentum = 0"));
    CHECK(values_of(net) == before);      // no rank stepped its own parameters (fc's, on the other rank)
    CHECK(opt.state_dict().tensors.empty());  // nor made a momentum buffer
}
