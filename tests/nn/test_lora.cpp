// tests/nn/test_lora.cpp — nn::add_lora and nn::apply_lora: the adapted Linear on hand numbers,
// equal to the base at B = 0, merge and unmerge, the base alone when disabled, the frozen base
// without gradients, the parameter names, the counts, and the refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

// Linear 2 → 2 with W = [[1, 2], [3, 4]], b = [0.5, -0.5], and its adapter at r = 1, α = 2
// (s = α/r = 2) with A = [[1, 1]] and B = [[2], [-1]]: s·B·A = [[4, 4], [-2, -2]].
std::shared_ptr<nn::Linear> hand_layer() {
    auto fc = std::make_shared<nn::Linear>(2, 2);
    fc->weight.mutable_data() = Tensor({{1, 2}, {3, 4}}).data();
    fc->bias.mutable_data() = Tensor({0.5, -0.5}).data();
    nn::LoRA& lora = nn::add_lora(*fc, nn::LoRAOptions().rank(1).alpha(2));
    lora.A->weight.mutable_data() = Tensor({{1, 1}}).data();
    lora.B->weight.mutable_data() = Tensor({{2}, {-1}}).data();
    return fc;
}

// A block-shaped model: attn {c_attn 4 → 12, c_proj 4 → 4}, mlp {c_fc 4 → 16, c_proj 16 → 4}, ln (LayerNorm 4).
struct Attn : nn::Module {
    std::shared_ptr<nn::Linear> c_attn = register_module("c_attn", std::make_shared<nn::Linear>(4, 12));
    std::shared_ptr<nn::Linear> c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4, 4));
};
struct Mlp : nn::Module {
    std::shared_ptr<nn::Linear> c_fc = register_module("c_fc", std::make_shared<nn::Linear>(4, 16));
    std::shared_ptr<nn::Linear> c_proj = register_module("c_proj", std::make_shared<nn::Linear>(16, 4));
};
struct Block : nn::Module {
    std::shared_ptr<Attn> attn = register_module("attn", std::make_shared<Attn>());
    std::shared_ptr<Mlp> mlp = register_module("mlp", std::make_shared<Mlp>());
    std::shared_ptr<nn::LayerNorm> ln = register_module("ln", std::make_shared<nn::LayerNorm>(4));
};

}  // namespace

TEST_CASE("LoRA: y = x Wᵀ + b + s·(x Aᵀ) Bᵀ on hand numbers", "[nn][lora]") {
    const auto fc = hand_layer();
    // x = [1, 2]: x Wᵀ + b = [5.5, 10.5]; x Aᵀ = 3; s·3·B = [12, -6]
    const Tensor y = fc->forward(Tensor({{1, 2}}));
    CHECK(y.data()(0, 0) == 17.5f);
    CHECK(y.data()(0, 1) == 4.5f);
    REQUIRE(fc->lora()->options().scaling() == 2.0);
    CHECK(nn::LoRAOptions().rank(4).alpha(8).use_rslora(true).scaling() == 4.0);  // α/√r
}

TEST_CASE("LoRA: at B = 0 the adapted layer equals the base bit for bit", "[nn][lora]") {
    manual_seed(1);
    nn::Linear fc(8, 6);
    const Tensor x = randn({5, 8});
    const Array base = fc.forward(x).data();
    nn::LoRA& lora = nn::add_lora(fc, nn::LoRAOptions().rank(3));
    CHECK(bits_equal(fc.forward(x).data(), base));
    CHECK(lora.A->weight.data().shape() == ArrayShape{3, 8});  // (r, in)
    CHECK(lora.B->weight.data().shape() == ArrayShape{6, 3});  // (out, r)
    const real bound = real(1) / std::sqrt(real(8));           // A ~ U(±1/√in)
    CHECK(xt::amax(xt::abs(lora.A->weight.data()))() <= bound);
    CHECK(xt::amax(xt::abs(lora.A->weight.data()))() > 0);
}

TEST_CASE("LoRA: merge adds s·B·A to W, unmerge takes it back, with a non-zero B", "[nn][lora]") {
    const auto fc = hand_layer();
    nn::LoRA& lora = *fc->lora();
    fc->eval();  // merging is for inference: a merged adapter refuses to train
    const Tensor x = Tensor({{1, 2}, {-3, 0.25}});
    const Array unmerged = fc->forward(x).data();
    lora.merge();
    CHECK(bits_equal(fc->weight.data(), Tensor({{5, 6}, {1, 2}}).data()));  // W + [[4, 4], [-2, -2]]
    const Array merged = fc->forward(x).data();
    CHECK(xt::amax(xt::abs(merged - unmerged))() <= 1e-5f);
    CHECK_THROWS_WITH(lora.merge(), Contains("merged already"));
    CHECK_THROWS_WITH(lora.enabled(false), Contains("unmerge() before enabled(false)"));
    lora.unmerge();
    CHECK(xt::amax(xt::abs(fc->weight.data() - Tensor({{1, 2}, {3, 4}}).data()))() <= 1e-6f);
    CHECK_THROWS_WITH(lora.unmerge(), Contains("not merged"));

    manual_seed(2);  // the same on random sizes, B drawn away from zero
    nn::Linear big(48, 40);
    const Tensor W0 = Tensor(big.weight.data());
    nn::LoRA& l2 = nn::add_lora(big, nn::LoRAOptions().rank(4).alpha(16));
    big.eval();
    l2.B->weight.mutable_data() = randn({40, 4}).data();
    const Tensor xb = randn({7, 48});
    const Array before = big.forward(xb).data();
    l2.merge();
    CHECK(xt::amax(xt::abs(big.forward(xb).data() - before))() <= 1e-5f * xt::amax(xt::abs(before))());
    l2.unmerge();
    CHECK(xt::amax(xt::abs(big.weight.data() - W0.data()))() <= 1e-6f);
}

TEST_CASE("LoRA: enabled(false) runs the base alone, bit for bit", "[nn][lora]") {
    const auto fc = hand_layer();
    const Tensor x = Tensor({{1, 2}});
    fc->lora()->enabled(false);
    const Array off = fc->forward(x).data();
    CHECK(off(0, 0) == 5.5f);
    CHECK(off(0, 1) == 10.5f);
    fc->lora()->enabled(true);
    CHECK(fc->forward(x).data()(0, 0) == 17.5f);
}

TEST_CASE("LoRA: backward reaches A and B, and leaves the frozen W and b without gradient", "[nn][lora]") {
    const auto fc = hand_layer();
    CHECK_FALSE(fc->weight.requires_grad());
    CHECK_FALSE(fc->bias.requires_grad());
    const Tensor x = Tensor({{1, 2}}, true);
    fc->forward(x).sum().backward();
    CHECK_FALSE(fc->weight.grad().defined());
    CHECK_FALSE(fc->bias.grad().defined());
    // L = Σ y: dL/dB = s·(x Aᵀ) = [[6], [6]]; dL/dA = s·(Bᵀ·1)·x = 2·1·[1, 2] = [[2, 4]]
    CHECK(bits_equal(fc->lora()->B->weight.grad().data(), Tensor({{6}, {6}}).data()));
    CHECK(bits_equal(fc->lora()->A->weight.grad().data(), Tensor({{2, 4}}).data()));
    // dL/dx = 1·W + s·(1·B)·A = [4, 6] + 2·1·[1, 1] = [6, 8]
    CHECK(bits_equal(x.grad().data(), Tensor({{6, 8}}).data()));
}

TEST_CASE("LoRA: the adapter's parameters are named as PEFT names them", "[nn][lora]") {
    Block block;
    nn::apply_lora(block, {"attn.c_attn"}, nn::LoRAOptions().rank(2));
    std::vector<std::string> names;
    for (const auto& [name, tensor] : block.named_parameters()) names.push_back(name);
    CHECK(std::find(names.begin(), names.end(), "attn.c_attn.lora_A.weight") != names.end());
    CHECK(std::find(names.begin(), names.end(), "attn.c_attn.lora_B.weight") != names.end());
    CHECK(block.attn->c_attn->lora()->A->weight.data().shape() == ArrayShape{2, 4});
    CHECK(block.attn->c_attn->lora()->B->weight.data().shape() == ArrayShape{12, 2});
}

TEST_CASE("apply_lora: targets by name and by '*', everything else frozen, the counts", "[nn][lora]") {
    Block block;
    const std::size_t all = block.num_parameters();
    const auto paths = nn::apply_lora(block, {"attn.c_attn", "mlp.*"}, nn::LoRAOptions().rank(2));
    CHECK(paths == std::vector<std::string>{"attn.c_attn", "mlp.c_fc", "mlp.c_proj"});
    CHECK(block.attn->c_proj->lora() == nullptr);
    const nn::ParameterCounts counts = nn::count_parameters(block);
    const std::size_t adapter = 2 * (4 + 12) + 2 * (4 + 16) + 2 * (16 + 4);  // r·(in + out) each
    CHECK(counts.trainable == adapter);
    CHECK(counts.frozen == all);
    CHECK_FALSE(block.ln->weight.requires_grad());
    CHECK_FALSE(block.attn->c_proj->weight.requires_grad());
}

TEST_CASE("apply_lora and add_lora refuse bad targets and options, leaving the model as it was",
          "[nn][lora]") {
    Block block;
    CHECK_THROWS_WITH(nn::apply_lora(block, {"attn.q_proj"}),
                      Contains("'attn.q_proj' matches no Linear") && Contains("attn.c_attn, attn.c_proj, mlp.c_fc"));
    CHECK_THROWS_WITH(nn::apply_lora(block, {}), Contains("no target modules"));
    CHECK_THROWS_WITH(nn::apply_lora(block, {"mlp.*"}, nn::LoRAOptions().rank(5)),
                      Contains("the Linear 'mlp.c_fc'") && Contains("rank r = 5 is outside [1, 4]"));
    CHECK_THROWS_WITH(nn::apply_lora(block, {"attn.*"}, nn::LoRAOptions().rank(2).parts({4, 4, 4}, {true, false, true})),
                      Contains("the Linear 'attn.c_proj'") && Contains("sum to 12, the Linear has out_features = 4"));
    CHECK(nn::count_parameters(block).frozen == 0);  // nothing frozen by the refused calls
    CHECK(block.mlp->c_fc->lora() == nullptr);

    nn::Linear fc(3, 5);
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(0)), Contains("rank r = 0 is outside [1, 3]"));
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(2).alpha(0)), Contains("alpha = 0 must be finite and > 0"));
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(2).alpha(std::numeric_limits<double>::quiet_NaN())),
                      Contains("alpha = nan"));
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(2).dropout(1)), Contains("dropout = 1 is outside [0, 1)"));
    CHECK(fc.weight.requires_grad());
    nn::add_lora(fc, nn::LoRAOptions().rank(2));
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(2)), Contains("has an adapter already"));
    CHECK_THROWS_AS(nn::add_lora(fc, nn::LoRAOptions().rank(2)), ValueError);
}

TEST_CASE("LoRA under AdamW: state for the adapter alone, 8 bytes per trainable scalar", "[nn][lora][optim]") {
    manual_seed(5);
    Block block;
    nn::apply_lora(block, {"attn.c_attn", "mlp.*"}, nn::LoRAOptions().rank(2));
    const Tensor W0 = Tensor(block.mlp->c_fc->weight.data());
    optim::AdamW opt(block.named_parameters());
    const Tensor x = randn({3, 4});
    const Tensor h = block.mlp->c_fc->forward(narrow(block.attn->c_attn->forward(x), 1, 0, 4));
    opt.zero_grad();
    block.mlp->c_proj->forward(h).pow(2).sum().backward();
    opt.step();
    const optim::MemoryReport report = opt.memory_report();
    const optim::MemoryRow total = report.total();
    const std::size_t trainable = nn::count_parameters(block).trainable;
    CHECK(total.exp_avg_bytes + total.exp_avg_sq_bytes == 2 * sizeof(float) * trainable);  // m and v
    for (const optim::MemoryRow& row : report.rows) {
        const bool adapter = row.name.find(".lora_") != std::string::npos;
        INFO(row.name);
        CHECK((row.grad_bytes > 0) == adapter);
        CHECK((row.state_bytes() > 0) == adapter);
    }
    CHECK(bits_equal(block.mlp->c_fc->weight.data(), W0.data()));  // the base did not move
}

TEST_CASE("apply_lora adapts a Linear registered under two names once, and refuses nothing", "[nn][lora][regression]") {
    // One Linear 4 → 4 shared as "a" and "b", and its own Linear 4 → 4 as "c": "*" names three
    // paths but two layers. Adapting the shared one twice would throw after freezing the model.
    struct Shared : nn::Module {
        std::shared_ptr<nn::Linear> fc = std::make_shared<nn::Linear>(4, 4);
        std::shared_ptr<nn::Linear> c = std::make_shared<nn::Linear>(4, 4);
        Shared() {
            register_module("a", fc);
            register_module("b", fc);
            register_module("c", c);
        }
    } model;
    const auto paths = nn::apply_lora(model, {"*"}, nn::LoRAOptions().rank(2));
    CHECK(paths == std::vector<std::string>{"a", "c"});  // the shared layer under its first name
    REQUIRE(model.fc->lora() != nullptr);
    REQUIRE(model.c->lora() != nullptr);
    CHECK(nn::adapted_layers(model).size() == 2);     // the shared layer once, at "a"
    const nn::ParameterCounts counts = nn::count_parameters(model);
    CHECK(counts.trainable == 2 * 2 * (4 + 4));  // two adapters of r·(in + out)
    CHECK(counts.frozen == 2 * (16 + 4));        // two bases of W (4, 4) and b (4)
}

TEST_CASE("add_lora refuses an α whose scaling s is not a finite non-zero real", "[nn][lora][regression]") {
    // s = α/r computed in double and applied as `real`: past real's largest value s becomes inf, and
    // inf·(B = 0) makes every output NaN; below its smallest it becomes 0, an adapter that does nothing.
    const double too_big = 4.0 * double(std::numeric_limits<real>::max());
    const double too_small = double(std::numeric_limits<real>::denorm_min()) / 4;
    nn::Linear fc(4, 4);
    if (std::isfinite(too_big))  // in a float build; in a double build α = inf is refused as not finite
        CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(1).alpha(too_big)), Contains("scaling"));
    else
        CHECK_THROWS_AS(nn::add_lora(fc, nn::LoRAOptions().rank(1).alpha(too_big)), ValueError);
    CHECK(fc.lora() == nullptr);
    CHECK(fc.weight.requires_grad());
    nn::Linear fc2(4, 4);
    CHECK_THROWS_AS(nn::add_lora(fc2, nn::LoRAOptions().rank(1).alpha(too_small)), ValueError);
    CHECK(fc2.lora() == nullptr);
}

TEST_CASE("tie_weights refuses a head that has a LoRA adapter", "[nn][lora][regression]") {
    // The adapter holds the head's W: tied afterwards, the head would read the table while merge()
    // wrote into the old W, and the table (trainable) would come back into the frozen base.
    nn::Embedding wte(10, 4);
    nn::Linear head(4, 10, /*bias=*/false);
    nn::add_lora(head, nn::LoRAOptions().rank(2));
    const TensorImpl* before = head.weight.impl();
    CHECK_THROWS_WITH(nn::tie_weights(head, wte), Contains("LoRA adapter") && Contains("tie_weights"));
    CHECK(head.weight.impl() == before);
    CHECK_FALSE(head.weight.requires_grad());
}

// A head tied to the token table (nn::tie_weights) shares its W with the table: adapting it would
// freeze the table, and merge() would change every token's lookup too. Refused, before any change.
TEST_CASE("add_lora and apply_lora refuse a head tied to an Embedding's table", "[nn][lora][regression]") {
    struct Tied : nn::Module {
        std::shared_ptr<nn::Embedding> wte = register_module("wte", std::make_shared<nn::Embedding>(10, 4));
        std::shared_ptr<nn::Linear> lm_head = register_module("lm_head", std::make_shared<nn::Linear>(4, 10, false));
        Tied() { nn::tie_weights(*lm_head, *wte); }
    };
    Tied model;
    CHECK_THROWS_WITH(nn::add_lora(*model.lm_head, nn::LoRAOptions().rank(2)),
                      Contains("tied to an Embedding's table") && Contains("nn::tie_weights"));
    CHECK_THROWS_WITH(nn::apply_lora(model, {"lm_head"}, nn::LoRAOptions().rank(2)),
                      Contains("'lm_head'") && Contains("tied to an Embedding's table"));
    CHECK(model.wte->weight.requires_grad());
    CHECK(model.lm_head->lora() == nullptr);
}

// ---- parts of a fused output (LoRAOptions::parts) -------------------------------------------------

namespace {
// The fused q|k|v of grouped-query attention in miniature: Linear 2 → 4, parts q (2 rows), k (1), v (1),
// adapted at q and v with r = 1, α = 2 (s = 2). W = [[1, 2], [3, 4], [5, 6], [7, 8]], no bias;
// A = [A_q; A_v] = [[1, 1], [1, -1]], B = [B_q; B_v] = [[1], [2], [-1]].
std::shared_ptr<nn::Linear> hand_qkv() {
    auto fc = std::make_shared<nn::Linear>(2, 4, /*bias=*/false);
    fc->weight.mutable_data() = Tensor({{1, 2}, {3, 4}, {5, 6}, {7, 8}}).data();
    nn::LoRA& lora = nn::add_lora(*fc, nn::LoRAOptions().rank(1).alpha(2).parts({2, 1, 1}, {true, false, true}));
    lora.A->weight.mutable_data() = Tensor({{1, 1}, {1, -1}}).data();
    lora.B->weight.mutable_data() = Tensor({{1}, {2}, {-1}}).data();
    return fc;
}
}  // namespace

TEST_CASE("LoRA parts: q and v adapted, k the base's, on hand numbers, merge touching their rows alone", "[nn][lora]") {
    const auto fc = hand_qkv();
    nn::LoRA& lora = *fc->lora();
    CHECK(lora.A->weight.data().shape() == ArrayShape{2, 2});  // (k·r, in), k = 2 adapted parts
    CHECK(lora.B->weight.data().shape() == ArrayShape{3, 1});  // (n_q + n_v, r)
    // x = [1, 2]: x Wᵀ = [5, 11, 17, 23]; x A_qᵀ = 3 → q += 2·3·[1, 2] = [6, 12]; x A_vᵀ = -1 → v += 2·(-1)·(-1) = 2
    const Tensor x = Tensor({{1, 2}});
    CHECK(bits_equal(fc->forward(x).data(), Tensor({{11, 23, 17, 25}}).data()));
    fc->eval();
    lora.merge();
    // rows q += 2·B_q·A_q = [[2, 2], [4, 4]]; row k as it was; row v += 2·B_v·A_v = [-2, 2]
    CHECK(bits_equal(fc->weight.data(), Tensor({{3, 4}, {7, 8}, {5, 6}, {5, 10}}).data()));
    CHECK(bits_equal(fc->forward(x).data(), Tensor({{11, 23, 17, 25}}).data()));
    lora.unmerge();
    CHECK(bits_equal(fc->weight.data(), Tensor({{1, 2}, {3, 4}, {5, 6}, {7, 8}}).data()));
}

TEST_CASE("LoRA parts: merged equals unmerged, the parts not adapted equal the base bit for bit", "[nn][lora]") {
    manual_seed(11);
    const std::int64_t d = 8, e = 4;  // q (d), k (e), v (e): Linear d → d + 2e
    for (const std::vector<bool>& adapted : {std::vector<bool>{true, false, true}, std::vector<bool>{false, true, true},
                                              std::vector<bool>{true, false, false}}) {
        nn::Linear qkv(d, d + 2 * e);
        const Tensor W0 = Tensor(qkv.weight.data());
        const Tensor x = randn({2, 3, d});
        const Array base = qkv.forward(x).data();
        nn::LoRA& lora = nn::add_lora(qkv, nn::LoRAOptions().rank(2).alpha(5).parts({d, e, e}, adapted));
        lora.B->weight.mutable_data() = randn(lora.B->weight.shape()).data();
        const Array unmerged = qkv.forward(x).data();
        const std::int64_t starts[] = {0, d, d + e}, sizes[] = {d, e, e};
        for (int part = 0; part < 3; ++part) {
            const Array mine = xt::view(unmerged, xt::all(), xt::all(), xt::range(starts[part], starts[part] + sizes[part]));
            const Array theirs = xt::view(base, xt::all(), xt::all(), xt::range(starts[part], starts[part] + sizes[part]));
            INFO("part " << part);
            CHECK(bits_equal(mine, theirs) == !adapted[part]);  // a non-zero B moves the adapted parts only
        }
        lora.enabled(false);
        CHECK(bits_equal(qkv.forward(x).data(), base));
        lora.enabled(true);
        qkv.eval();
        lora.merge();
        CHECK(xt::amax(xt::abs(qkv.forward(x).data() - unmerged))() <= 1e-5f * xt::amax(xt::abs(unmerged))());
        lora.unmerge();
        CHECK(xt::amax(xt::abs(qkv.weight.data() - W0.data()))() <= 1e-6f);
    }
}

TEST_CASE("LoRA parts: add_lora refuses parts that do not describe the output", "[nn][lora]") {
    nn::Linear qkv(8, 16);
    const auto refuse = [&qkv](std::vector<std::int64_t> sizes, std::vector<bool> adapted, std::int64_t r = 2) {
        return message_of<ValueError>([&] { nn::add_lora(qkv, nn::LoRAOptions().rank(r).parts(sizes, adapted)); });
    };
    CHECK_THAT(refuse({8, 4, 2}, {true, false, true}), Contains("the sizes 8, 4, 2 sum to 14, the Linear has out_features = 16"));
    CHECK_THAT(refuse({8, 4, 4}, {true, false}), Contains("3 sizes but 2 adapted flags"));
    CHECK_THAT(refuse({8, 8, 0}, {true, false, false}), Contains("size 0 of part 2 is not positive"));
    CHECK_THAT(refuse({8, 4, 4}, {false, false, false}), Contains("no part is adapted"));
    CHECK_THAT(refuse({8, 4, 4}, {true, false, true}, 5), Contains("rank r = 5 is outside [1, 4]") &&
                                                         Contains("smallest adapted part has 4 rows"));
    CHECK(qkv.lora() == nullptr);
    CHECK(qkv.weight.requires_grad());
}

// ---- defects found by a hostile trial ----------------------------------------------------------

TEST_CASE("a second apply_lora call keeps the first call's adapters trainable", "[nn][lora][regression]") {
    // PEFT's add_adapter keeps an adapter trainable; only the base is frozen.
    Block block;
    nn::apply_lora(block, {"attn.c_attn"}, nn::LoRAOptions().rank(2));
    nn::apply_lora(block, {"mlp.*"}, nn::LoRAOptions().rank(2));
    for (const Tensor& p : block.attn->c_attn->lora()->parameters()) CHECK(p.requires_grad());
    const std::size_t adapters = 2 * (4 + 12) + 2 * (4 + 16) + 2 * (16 + 4);
    CHECK(nn::count_parameters(block).trainable == adapters);
    CHECK_FALSE(block.attn->c_attn->weight.requires_grad());
    CHECK_FALSE(block.ln->weight.requires_grad());
}

TEST_CASE("state_dict and load_state_dict refuse a model whose adapter is merged", "[nn][lora][regression]") {
    // A merged W saved beside A and B carries no mark of it: loaded into an unmerged model the
    // update would count twice, and unmerge() after loading a base would subtract it from the base.
    manual_seed(6);
    Block block;
    nn::apply_lora(block, {"attn.c_attn"}, nn::LoRAOptions().rank(2));
    nn::LoRA& lora = *block.attn->c_attn->lora();
    lora.B->weight.mutable_data() = randn({12, 2}).data();
    const NamedTensors unmerged = block.state_dict();
    lora.merge();
    CHECK_THROWS_WITH(block.state_dict(), Contains("'attn.c_attn'") && Contains("unmerge() first"));
    CHECK_THROWS_WITH(block.load_state_dict(unmerged), Contains("'attn.c_attn'") && Contains("unmerge() first"));
    lora.unmerge();
    CHECK(block.state_dict().size() == unmerged.size());
    // The merged weights go out under the base's names, for a model without adapters.
    Block plain;
    const Tensor x = randn({3, 4});
    plain.load_state_dict(nn::merged_state_dict(block));
    CHECK(xt::amax(xt::abs(plain.attn->c_attn->forward(x).data() - block.attn->c_attn->forward(x).data()))() <= 1e-5f);
    CHECK(lora.merged() == false);
}

TEST_CASE("refusals that say what to do: no layer to adapt, a base checkpoint after apply_lora, training merged",
          "[nn][lora][regression]") {
    nn::LayerNorm norm(4);
    CHECK_THROWS_WITH(nn::apply_lora(norm, {"*"}), Contains("the model has no Linear or Embedding"));

    Block base;
    Block adapted;
    nn::apply_lora(adapted, {"attn.c_attn"}, nn::LoRAOptions().rank(2));
    CHECK_THROWS_WITH(adapted.load_state_dict(base.state_dict()),
                      Contains("'attn.c_attn'") && Contains("load the base weights before nn::apply_lora"));

    // Merged in training mode, the forward would use the merged W and give A and B no gradient.
    const auto fc = hand_layer();
    fc->lora()->merge();
    CHECK_THROWS_WITH(fc->forward(Tensor({{1, 2}})), Contains("merged") && Contains("unmerge() before training"));
    fc->eval();
    CHECK(fc->forward(Tensor({{1, 2}})).data()(0, 0) == 17.5f);
    fc->train();
    {
        NoGradGuard no_grad;  // inference in training mode: no gradient expected
        CHECK(fc->forward(Tensor({{1, 2}})).data()(0, 0) == 17.5f);
    }
    nn::Embedding table(5, 3);
    nn::add_lora(table, nn::LoRAOptions().rank(2)).merge();
    CHECK_THROWS_WITH(table.forward(IndexTensor{1}), Contains("unmerge() before training"));
}

// ---- defects found by a second hostile trial --------------------------------------------------

TEST_CASE("LoRA parts: sizes whose sum overflows are refused, not merged out of bounds", "[nn][lora][regression]") {
    // INT64_MAX + INT64_MAX + 6 wraps to 4 = out_features in int64: accepted, merge() would write rows
    // [-2, 4) of W.
    nn::Linear fc(4, 4);
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    CHECK_THROWS_WITH(nn::add_lora(fc, nn::LoRAOptions().rank(1).parts({big, big, 6}, {false, false, true})),
                      Contains("sum to more than 2^63 - 1, the Linear has out_features = 4"));
    CHECK(fc.lora() == nullptr);
}

TEST_CASE("merge() refuses a disabled adapter", "[nn][lora][regression]") {
    // Merged while disabled, the layer would compute the adapted output with enabled() false.
    const auto fc = hand_layer();
    const Tensor W = Tensor(fc->weight.data());
    fc->lora()->enabled(false);
    CHECK_THROWS_WITH(fc->lora()->merge(), Contains("disabled") && Contains("enabled(true)"));
    CHECK(fc->lora()->merged() == false);
    CHECK(bits_equal(fc->weight.data(), W.data()));
}

TEST_CASE("a model that is itself the adapted Linear: adapted_layers, merged_state_dict, apply_lora",
          "[nn][lora][regression]") {
    // A walk from the model's children alone finds no adapter on a bare adapted Linear, and
    // merged_state_dict would return W unmerged beside lora_A and lora_B.
    const auto fc = hand_layer();  // s·B·A = [[4, 4], [-2, -2]]
    const auto layers = nn::adapted_layers(*fc);
    REQUIRE(layers.size() == 1);
    CHECK(layers[0].first.empty());
    const NamedTensors merged = nn::merged_state_dict(*fc);
    REQUIRE(names_of(merged) == std::vector<std::string>{"weight", "bias"});
    CHECK(merged[0].second.data() == Tensor({{5, 6}, {1, 2}}).data());

    nn::Linear bare(3, 2);
    CHECK(nn::apply_lora(bare, {"*"}, nn::LoRAOptions().rank(1)) == std::vector<std::string>{""});
    CHECK(bare.lora() != nullptr);
}

TEST_CASE("a merged adapter whose A is frozen and B trains still refuses a training forward", "[nn][lora][regression]") {
    // A check of A alone would let B silently get no gradient.
    const auto fc = hand_layer();
    fc->lora()->A->weight.requires_grad_(false);
    fc->lora()->merge();
    CHECK_THROWS_WITH(fc->forward(Tensor({{1, 2}})), Contains("unmerge() before training"));
}

TEST_CASE("LoRA: a Linear's adapter runs as one op, lora_linear, without a sum or a scale of its own",
          "[nn][lora][regression]") {
    const auto fc = hand_layer();
    const Tensor y = fc->forward(Tensor({{1, 2}}, true));
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name == "lora_linear");
    CHECK_FALSE(graph_has(y, "add"));
    CHECK_FALSE(graph_has(y, "mul"));
    // y = x Wᵀ + b + s·(x Aᵀ) Bᵀ = [5.5, 10.5] + 2·3·[2, -1] = [17.5, 4.5]
    CHECK(bits_equal(y.data(), Tensor({{17.5, 4.5}}).data()));
}

TEST_CASE("functional::lora_linear equals the composed x Wᵀ + b + s·B(A(x)): values and every gradient",
          "[nn][lora]") {
    manual_seed(11);
    // Every input trained (an unfrozen W and b too), a (2, 3, 6) input, and without a bias.
    for (const bool with_bias : {true, false}) {
        const Tensor x = leaf({2, 3, 6}), W = leaf({5, 6}), A = leaf({3, 6}), B = leaf({5, 3});
        const Tensor b = with_bias ? leaf({5}) : Tensor();
        const Tensor G = randn({2, 3, 5});
        const real s = real(0.75);
        std::vector<Tensor> inputs{x, W, A, B};
        if (with_bias) inputs.push_back(b);
        const Tensor fused = nn::functional::lora_linear(x, W, b, A, B, s);
        const Tensor composed = nn::functional::linear(x, W, b) +
                                nn::functional::linear(nn::functional::linear(x, A), B) * s;
        require_values(fused, composed);
        const Grads g_fused = grad(weighted_sum(fused, G), inputs);
        const Grads g_composed = grad(weighted_sum(composed, G), inputs);
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            INFO("input " << i);
            require_values(Tensor(std::get<Array>(g_fused[i]->value)), Tensor(std::get<Array>(g_composed[i]->value)));
        }
    }
}

TEST_CASE("functional::lora_linear: an empty batch gives an empty y and zero gradients of A, B and W",
          "[nn][lora]") {
    const Tensor x = zeros({0, 2}, true);
    const Tensor W = leaf({3, 2}), A = leaf({1, 2}), B = leaf({3, 1});
    const Tensor y = nn::functional::lora_linear(x, W, Tensor(), A, B, 2);
    CHECK(y.shape() == Shape{0, 3});
    const Grads g = grad(y.sum(), {W, A, B});
    for (std::size_t i = 0; i < 3; ++i) CHECK(xt::all(xt::equal(std::get<Array>(g[i]->value), real(0))));
}

TEST_CASE("functional::lora_linear refuses A and B that do not fit the weight", "[nn][lora]") {
    const Tensor x = leaf({2, 4}), W = leaf({3, 4});
    require_value_error([&] { nn::functional::lora_linear(x, W, Tensor(), leaf({2, 5}), leaf({3, 2}), 1); },
                        "A (2, 5) and B (3, 2) do not fit the weight (3, 4)");
    require_value_error([&] { nn::functional::lora_linear(x, W, Tensor(), leaf({2, 4}), leaf({3, 1}), 1); },
                        "must be (r, 4) and B (3, r)");
}
