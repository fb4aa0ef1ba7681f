// tests/distributed/test_ddp.cpp — DistributedDataParallel: the broadcast, the buckets, the mean of
// dense, row-sparse and mixed gradients by hand, and the claim of distributed/README.md itself:
// W ranks on slices of a batch take the same steps as one process on the whole batch.
//
// The equivalence tests need no second program: every rank also trains a reference copy of the
// model on the whole global batch, alone, and compares it with its data-parallel copy after each
// step. Summation orders differ, so the bound is 1e-5 (relative for losses, absolute + relative
// for parameters), not bit equality; at W = 1 both runs are the same computation.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <xgrad/distributed/ddp.hpp>
#include <xgrad/distributed/detail/signature.hpp>

#include "examples/gpt/data.hpp"
#include "examples/gpt/model.hpp"
#include "test_helpers.hpp"

using namespace xgrad;
namespace dist = xgrad::distributed;
using xgrad::testing::require_values;

namespace {

// Every parameter of `a` equals `b`'s within tol.
void require_same_parameters(const nn::Module& a, const nn::Module& b, double tol) {
    const NamedTensors pa = a.named_parameters(), pb = b.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
        INFO("parameter " << pa[i].first);
        require_values(pa[i].second, pb[i].second, tol);
    }
}

// Rows [begin, begin + n) of the global batch's offsets: rank r's part of micro-batch k is
// begin = k·B/N + r·B/(N·W), n = B/(N·W) (examples/common/data_parallel.hpp does the same).
std::vector<std::size_t> part(const std::vector<std::size_t>& offsets, int k, int accum) {
    const std::size_t W = std::size_t(dist::world_size()), n = offsets.size() / (std::size_t(accum) * W);
    const auto begin = offsets.begin() + std::ptrdiff_t(std::size_t(k) * n * W + std::size_t(dist::rank()) * n);
    return {begin, begin + std::ptrdiff_t(n)};
}

}  // namespace

TEST_CASE("ddp: the constructor copies rank 0's parameters into every rank", "[distributed][ddp]") {
    manual_seed(100 + std::uint64_t(dist::rank()));  // each rank starts from different weights
    nn::Linear fc(3, 2);
    manual_seed(100);
    nn::Linear rank0(3, 2);  // what rank 0 drew
    dist::DistributedDataParallel ddp(fc);
    require_values(fc.weight, rank0.weight, 0);
    require_values(fc.bias, rank0.bias, 0);
}

TEST_CASE("ddp: ranks whose models differ are refused on every rank, naming the difference", "[distributed][ddp]") {
    const int r = dist::rank();
    if (dist::world_size() == 1) return;
    xgrad::testing::TinyNet frozen_on_1;  // the same shapes; rank 1 freezes fc.bias
    if (r == 1) frozen_on_1.fc->bias.requires_grad_(false);
    REQUIRE_THROWS_WITH(dist::DistributedDataParallel(frozen_on_1),
                        Catch::Contains("the model (element type, parameters, buffers, bucket_bytes): rank 1 differs from rank 0") &&
                            Catch::Contains("'parameter fc.bias (2) frozen' on rank 1"));
    xgrad::testing::TinyNet net;  // a different bucket cap, or an invalid one, on rank 1 only
    REQUIRE_THROWS_WITH(dist::DistributedDataParallel(net, dist::DDPOptions().bucket_bytes(r == 1 ? 8 : 100)),
                        Catch::Contains("'bucket_bytes 8' on rank 1 and 'bucket_bytes 100' on rank 0"));
    nn::Linear a(3, r == 1 ? 3 : 2);
    REQUIRE_THROWS_WITH(dist::DistributedDataParallel(a), Catch::Contains("'parameter weight (3, 3)' on rank 1"));
}

TEST_CASE("ddp: a float rank and a double rank are refused on every rank when DDP is built",
          "[distributed][ddp][regression]") {
    const int r = dist::rank();
    if (dist::world_size() == 1) return;
    nn::Linear fc(3, 2);
    // Rank 1 plays a program built with real = double: its constructor's first round sends the
    // same model, described with its element type.
    const char* what = "DistributedDataParallel: the model (element type, parameters, buffers, bucket_bytes)";
    const std::size_t bucket_bytes = dist::DDPOptions().bucket_bytes();
    const std::string refusal = "rank 1 differs from rank 0: line 1 is 'elements float64' on rank 1 and 'elements float32' on rank 0";
    if (r == 1)
        REQUIRE_THROWS_WITH(dist::check_same_on_all_ranks(what, dist::detail::model_text(fc, bucket_bytes, dist::backend::Number::Double)),
                            Catch::Contains(refusal));
    else REQUIRE_THROWS_WITH(dist::DistributedDataParallel(fc), Catch::Contains(refusal));
}

TEST_CASE("ddp: dense gradients are packed into buckets of at most bucket_bytes", "[distributed][ddp]") {
    xgrad::testing::TinyNet net;  // emb.weight (5, 3) 15 values, fc.weight (2, 3) 6, fc.bias (2,) 2
    dist::DistributedDataParallel one(net);
    REQUIRE(one.buckets().size() == 1);  // 23 values fit in 25 MiB
    REQUIRE(one.buckets()[0].numel == 23);
    // A cap of 8 values: emb.weight alone (larger than the cap), then fc.weight + fc.bias = 8.
    dist::DistributedDataParallel small(net, dist::DDPOptions().bucket_bytes(8 * sizeof(real)));
    REQUIRE(small.buckets().size() == 2);
    REQUIRE(small.buckets()[0].names == std::vector<std::string>{"emb.weight"});
    REQUIRE(small.buckets()[1].names == std::vector<std::string>{"fc.weight", "fc.bias"});
    REQUIRE_THROWS_WITH(dist::DistributedDataParallel(net, dist::DDPOptions().bucket_bytes(0)),
                        Catch::Contains("bucket_bytes must be positive"));
}

TEST_CASE("ddp: sync_gradients leaves the mean of the ranks' gradients on every rank", "[distributed][ddp]") {
    const int W = dist::world_size(), r = dist::rank();
    xgrad::testing::TinyNet net;
    dist::DistributedDataParallel ddp(net, dist::DDPOptions().bucket_bytes(8 * sizeof(real)));
    // Rank r's gradients: (r + 1) everywhere on fc.weight, (r + 1)·[1, −1] on fc.bias; emb none.
    net.fc->weight.set_grad(full({2, 3}, real(r + 1)));
    net.fc->bias.set_grad(Tensor{real(r + 1), -real(r + 1)});
    ddp.sync_gradients();
    const real mean = real(W + 1) / 2;  // (1 + 2 + ... + W) / W
    require_values(net.fc->weight.grad(), full({2, 3}, mean));
    require_values(net.fc->bias.grad(), Tensor{mean, -mean});
    REQUIRE_FALSE(net.emb->weight.has_grad());  // no rank had one: still none, not zeros
    REQUIRE(ddp.last_sync().all_reduces == (W > 1 ? 1 : 0));  // the second bucket only; none alone
    REQUIRE(ddp.last_sync().dense_bytes == (W > 1 ? 8 * sizeof(real) : 0));
}

TEST_CASE("ddp: a row-sparse table stays row-sparse: the union of the ranks' rows, averaged", "[distributed][ddp]") {
    const int W = dist::world_size(), r = dist::rank();
    nn::Embedding emb(6, 2, nn::EmbeddingOptions().sparse(true));
    dist::DistributedDataParallel ddp(emb);
    // Rank r looks up rows {r, 5}: dL/dE[row] = 1 for each lookup of the sum of the outputs.
    xgrad::sum(emb.forward(IndexTensor{std::int64_t(r), 5})).backward();
    ddp.sync_gradients();
    const SparseGrad* g = emb.weight.sparse_grad();
    REQUIRE(g != nullptr);
    std::vector<std::int64_t> rows;
    for (int q = 0; q < W; ++q) rows.push_back(q);
    rows.push_back(5);
    REQUIRE(g->indices == rows);  // W = 2: {0, 1, 5}
    const Array dense = g->to_dense();
    REQUIRE(dense(0, 0) == Approx(1.0 / W));  // one rank of W looked up row 0
    REQUIRE(dense(5, 1) == Approx(1.0));      // every rank looked up row 5
    REQUIRE(ddp.last_sync().sparse_rows == (W > 1 ? 2 : 0));
    REQUIRE(ddp.last_sync().all_reduces == 0);
}

TEST_CASE("ddp: a table dense on one rank and row-sparse on another sums as dense", "[distributed][ddp]") {
    const int W = dist::world_size(), r = dist::rank();
    nn::Embedding emb(4, 2, nn::EmbeddingOptions().sparse(true));
    dist::DistributedDataParallel ddp(emb);
    if (r == 0) xgrad::sum(emb.forward(IndexTensor{std::int64_t(1)}) * real(2)).backward();  // row 1: [2, 2], sparse
    else emb.weight.set_grad(ones({4, 2}));                                                  // dense ones
    ddp.sync_gradients();
    if (W == 1) {  // alone: the sparse gradient is its own mean
        REQUIRE(emb.weight.sparse_grad() != nullptr);
        return;
    }
    REQUIRE(emb.weight.sparse_grad() == nullptr);
    // Rank 0 contributes [2, 2] on row 1, each other rank ones everywhere: mean over W.
    const real other = real(W - 1) / real(W), row1 = (2 + real(W - 1)) / real(W);
    require_values(emb.weight.grad(), Tensor{{other, other}, {row1, row1}, {other, other}, {other, other}});
}

TEST_CASE("ddp: W ranks on slices take the steps of one process on the whole batch (tiny GPT)", "[distributed][ddp]") {
    const int accum = GENERATE(1, 2);  // plain, and with gradient accumulation over 2 micro-batches
    INFO("grad_accum " << accum << ", W " << dist::world_size());
    const int W = dist::world_size(), B = 4 * W * accum, steps = 20;
    gpt::GPTConfig c;
    c.vocab = 11;
    c.block = 8;
    c.n_layer = 1;
    c.n_head = 2;
    c.d = 16;
    // No biases: the key bias of attention has a gradient of exactly 0 (adding b·q to every score
    // of a query's row does not change its softmax), so in floats its gradient is rounding noise,
    // which Adam divides by its own root mean square into steps of ±lr: any two summation orders,
    // here or against PyTorch, then differ in that bias by up to lr per step.
    c.bias = false;
    gpt::Ids text(400);
    std::mt19937_64 text_rng(3);
    for (auto& id : text) id = std::int64_t(text_rng() % 11);
    manual_seed(7);
    gpt::GPT ref(c);
    manual_seed(7);
    gpt::GPT model(c);
    auto ref_opt = gpt::make_adamw(ref, 1e-2, 0.9, 0.99, 0.1);
    auto opt = gpt::make_adamw(model, 1e-2, 0.9, 0.99, 0.1);
    dist::DistributedDataParallel ddp(model);
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<std::size_t> pick(0, text.size() - std::size_t(c.block) - 1);
    for (int step = 0; step < steps; ++step) {
        std::vector<std::size_t> offsets(static_cast<std::size_t>(B));
        for (auto& o : offsets) o = pick(rng);
        const gpt::Batch all = gpt::windows(text, offsets, int(c.block));
        const double ref_loss = gpt::train_step(ref, *ref_opt, all.x, all.y, 1.0).loss;

        opt->zero_grad();
        std::vector<double> loss{0.0};
        for (int k = 0; k < accum; ++k) {
            const gpt::Batch mine = gpt::windows(text, part(offsets, k, accum), int(c.block));
            Tensor l = nn::functional::cross_entropy(model.forward(mine.x), mine.y) / real(accum);
            l.backward();
            loss[0] += l.item();
        }
        ddp.sync_gradients();
        optim::clip_grad_norm_(model.named_parameters(), 1.0);
        opt->step();
        dist::all_reduce(loss, dist::ReduceOp::Mean);
        INFO("step " << step + 1);
        REQUIRE(loss[0] == Approx(ref_loss).epsilon(1e-5));
    }
    require_same_parameters(model, ref, 1e-5);
}

TEST_CASE("ddp: a sparse Embedding with lazy Adam takes the steps of one process", "[distributed][ddp]") {
    const int W = dist::world_size(), B = 6 * W, steps = 20;
    using Net = xgrad::testing::SparseTableNet;
    manual_seed(5);
    Net ref;
    manual_seed(5);
    Net net;
    optim::Adam ref_opt(ref.named_parameters(), optim::AdamOptions(0.05));
    optim::Adam opt(net.named_parameters(), optim::AdamOptions(0.05));
    dist::DistributedDataParallel ddp(net);
    std::mt19937_64 rng(2);
    for (int step = 0; step < steps; ++step) {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(B)), targets(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            ids[i] = std::int64_t(rng() % 40);  // a few of the 40 rows per step: most stay untouched
            targets[i] = ids[i] % 5;
        }
        auto loss_of = [](Net& n, const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y) {
            IndexArray xa(ArrayShape{x.size()}), ya(ArrayShape{y.size()});
            std::copy(x.begin(), x.end(), xa.begin());
            std::copy(y.begin(), y.end(), ya.begin());
            return nn::functional::cross_entropy(n.fc->forward(n.emb->forward(IndexTensor(xa))), IndexTensor(ya));
        };
        ref_opt.zero_grad();
        Tensor ref_loss = loss_of(ref, ids, targets);
        ref_loss.backward();
        ref_opt.step();

        const std::size_t n = ids.size() / std::size_t(W), at = n * std::size_t(dist::rank());
        opt.zero_grad();
        Tensor l = loss_of(net, {ids.begin() + std::ptrdiff_t(at), ids.begin() + std::ptrdiff_t(at + n)},
                           {targets.begin() + std::ptrdiff_t(at), targets.begin() + std::ptrdiff_t(at + n)});
        l.backward();
        ddp.sync_gradients();
        REQUIRE(net.emb->weight.sparse_grad() != nullptr);  // still row-sparse after the mean
        opt.step();
        std::vector<double> loss{l.item()};
        dist::all_reduce(loss, dist::ReduceOp::Mean);
        INFO("step " << step + 1);
        REQUIRE(loss[0] == Approx(ref_loss.item()).epsilon(1e-5));
    }
    require_same_parameters(net, ref, 1e-5);
}

TEST_CASE("ddp: a gradient on a parameter frozen when DDP was built is refused on every rank",
          "[distributed][ddp][regression]") {
    const int W = dist::world_size(), r = dist::rank();
    xgrad::testing::TinyNet net;
    net.fc->bias.requires_grad_(false);  // frozen when DDP is built: in none of its buckets
    dist::DistributedDataParallel ddp(net);
    net.fc->bias.requires_grad_(true);  // unfrozen later, as in gradual fine-tuning
    net.fc->weight.set_grad(full({2, 3}, real(r + 1)));
    net.fc->bias.set_grad(full({2}, real(r + 1)));
    const std::string on_every_rank = fmt::format("fc.bias has a gradient on {} of {} ranks", W, W);
    REQUIRE_THROWS_WITH(ddp.sync_gradients(),
                        Catch::Contains("DistributedDataParallel::sync_gradients: " + on_every_rank) &&
                            Catch::Contains("was frozen (requires_grad false) when this DistributedDataParallel was built") &&
                            Catch::Contains("build the DistributedDataParallel after unfreezing"));
    require_values(net.fc->weight.grad(), full({2, 3}, real(r + 1)));  // refused: no gradient averaged
    if (W > 1) {  // a gradient on one rank only is refused by every rank
        if (r != 1) net.fc->bias.reset_grad();
        REQUIRE_THROWS_WITH(ddp.sync_gradients(), Catch::Contains(fmt::format("fc.bias has a gradient on 1 of {} ranks", W)));
    }
    net.fc->bias.reset_grad();  // no gradient anywhere: nothing to average, nothing refused
    ddp.sync_gradients();
    const real mean = real(W + 1) / 2;  // (1 + 2 + ... + W) / W
    require_values(net.fc->weight.grad(), full({2, 3}, mean));

    dist::DistributedDataParallel rebuilt(net);  // built after the unfreezing: fc.bias is in a bucket
    net.fc->bias.set_grad(full({2}, real(r + 1)));
    rebuilt.sync_gradients();
    require_values(net.fc->bias.grad(), full({2}, mean));
    Tensor extra = net.register_parameter("extra", zeros({2}));  // registered after `rebuilt` was built
    extra.set_grad(ones({2}));
    REQUIRE_THROWS_WITH(rebuilt.sync_gradients(),
                        Catch::Contains(fmt::format("extra has a gradient on {} of {} ranks", W, W)) &&
                            Catch::Contains("was not a parameter of the module when this DistributedDataParallel was built"));
}

TEST_CASE("ddp: a parameter resized on one rank after DDP was built is refused on every rank",
          "[distributed][ddp][regression]") {
    const int W = dist::world_size(), r = dist::rank();
    nn::Linear fc(3, 2);
    dist::DistributedDataParallel ddp(fc);
    fc.bias.set_grad(full({2}, real(r + 1)));
    if (W > 1) {
        if (r == 1) fc.weight.set_data(Array(ArrayShape{2, 4}, real(0)));  // (2, 3) → (2, 4) on rank 1 only
        fc.weight.set_grad(ones(fc.weight.shape()));
        REQUIRE_THROWS_WITH(ddp.sync_gradients(),
                            Catch::Contains("DistributedDataParallel::sync_gradients: the parameters: rank 1 differs from rank 0: "
                                            "line 1 is 'parameter weight (2, 4)' on rank 1 and 'parameter weight (2, 3)' on rank 0"));
        require_values(fc.bias.grad(), full({2}, real(r + 1)));  // refused: no gradient averaged
    }
    fc.weight.set_data(Array(ArrayShape{2, 5}, real(0)));  // resized alike on every rank: averaged at its new size
    fc.weight.set_grad(full({2, 5}, real(r + 1)));
    ddp.sync_gradients();
    const real mean = real(W + 1) / 2;
    require_values(fc.weight.grad(), full({2, 5}, mean));
    require_values(fc.bias.grad(), full({2}, mean));
}

TEST_CASE("ddp: a parameter resized through mutable_data is refused before anything is sent",
          "[distributed][ddp][regression]") {
    // Every rank resizes alike, so the shapes the ranks compare agree; but the gradient keeps the
    // old (2, 3) while a bucket would take p.numel() = 60000 numbers from it (and write them back).
    // Ops, backward and the optimizers refuse such a parameter; so does the sync, on every rank.
    const int r = dist::rank();
    nn::Linear fc(3, 2);
    dist::DistributedDataParallel ddp(fc);
    fc.weight.set_grad(full({2, 3}, real(r + 1)));
    fc.weight.mutable_data() = Array(ArrayShape{200, 300}, real(0));  // not set_data: the gradient stays (2, 3)
    REQUIRE_THROWS_AS(ddp.sync_gradients(), ValueError);
    REQUIRE_THROWS_WITH(ddp.sync_gradients(), Catch::Contains("'weight'") && Catch::Contains("set_data"));
    require_values(fc.weight.grad(), full({2, 3}, real(r + 1)));
}
