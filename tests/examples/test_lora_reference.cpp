// tests/examples/test_lora_reference.cpp — examples/gpt's GPT with a LoRA adapter against PyTorch.
//
// tests/reference/make_lora_reference.py (torch, at development time) wrote a base GPT (V 17, L 2,
// H 2, d 16, T 8, learned positions, tied head) under nanoGPT's names, two adapters in PEFT's folder
// layout with a non-zero B on every c_attn, attn.c_proj, c_fc and mlp.c_proj (r 2, α 4; s = α/r and
// rsLoRA's α/√r), and the logits PyTorch computes in float64 with W + s·B·A merged by hand. Here the
// same files go through model.load_state_dict and nn::load_adapter; xgrad's float32 logits, unmerged
// and merged, must equal PyTorch's within 1e-5 (max abs); and nn::save_adapter writes back the same
// names and values, so the script reads xgrad's adapters as it reads its own.
#include <catch2/catch.hpp>

#include <string>

#include <xgrad/nn/lora.hpp>
#include <xgrad/nn/lora_file.hpp>
#include "examples/gpt_reference.hpp"
#include "test_helpers.hpp"

namespace test_lora_reference {  // a namespace of its own: the unity build puts files together
using namespace gpt;
using namespace gpt::testing;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    double d = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i)
        d = std::max(d, std::abs(double(a.data().data()[i]) - double(b.data().data()[i])));
    return d;
}

// The reference's base model, with no adapter.
std::unique_ptr<GPT> reference_base() {
    GPTConfig c;
    c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 2, c.d = 16, c.pos = "learned", c.tie = true;
    auto model = std::make_unique<GPT>(c);
    model->load_state_dict(reference("lora_base.safetensors").tensors);  // strict: nanoGPT's names, no other
    model->eval();
    return model;
}

// Loads `adapter` (a folder of tests/reference/) into the base and checks its logits, unmerged and merged.
void check_adapter(const std::string& adapter, bool rslora) {
    auto model = reference_base();
    const IndexTensor x = ids_of(expected("lora_reference.safetensors", "inputs"));
    const Tensor& want = expected("lora_reference.safetensors", adapter + "/logits");
    const Tensor& base = expected("lora_reference.safetensors", "base/logits");
    CHECK(max_abs_diff(model->forward(x), base) <= 1e-5);

    const auto paths = nn::apply_lora(*model, {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"},
                                      nn::LoRAOptions().rank(2).alpha(4).use_rslora(rslora));
    REQUIRE(paths.size() == 8);
    nn::load_adapter(*model, std::string(XGRAD_REFERENCE_DIR) + "/" + adapter);
    REQUIRE(max_abs_diff(want, base) > 0.2);  // the adapter moves the logits: B is not zero

    xgrad::testing::TempDir dir;
    nn::save_adapter(*model, dir.path.string());
    const auto mine = nn::load_safetensors((dir.path / "adapter_model.safetensors").string()).tensors;
    const auto theirs = reference(adapter + "/adapter_model.safetensors").tensors;
    REQUIRE(mine.size() == 16);  // A and B of 4 layers in 2 blocks
    REQUIRE(mine.size() == theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
        INFO(mine[i].first);
        CHECK(mine[i].first == theirs[i].first);
        CHECK(xgrad::testing::bits_equal(mine[i].second, theirs[i].second));
    }

    const double unmerged = max_abs_diff(model->forward(x), want);
    for (const auto& [path, adapter] : nn::adapted_layers(*model)) adapter->merge();
    const double merged = max_abs_diff(model->forward(x), want);
    UNSCOPED_INFO(adapter << ": max |xgrad − PyTorch| logits, unmerged " << unmerged << ", merged " << merged);
    CHECK(unmerged <= 1e-5);
    CHECK(merged <= 1e-5);
    for (const auto& [path, adapter] : nn::adapted_layers(*model)) {
        adapter->unmerge();
        adapter->enabled(false);
    }
    CHECK(max_abs_diff(model->forward(x), base) <= 1e-5);
}

}  // namespace

TEST_CASE("LoRA reference: a PEFT-layout adapter on the GPT gives PyTorch's logits (s = α/r)", "[gpt][lora][reference]") {
    check_adapter("lora_adapter", false);
}

TEST_CASE("LoRA reference: the rsLoRA adapter gives PyTorch's logits (s = α/√r)", "[gpt][lora][reference]") {
    check_adapter("lora_adapter_rslora", true);
}

}  // namespace test_lora_reference
