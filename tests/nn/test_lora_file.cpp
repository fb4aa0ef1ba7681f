// tests/nn/test_lora_file.cpp — nn::save_adapter and nn::load_adapter: PEFT's two files, a round
// trip into another copy of the model, each refusal leaving the model untouched, and an adapter on parts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

// proj (6 → 6) and head {fc (6 → 3)}, every base weight drawn from manual_seed(seed).
struct Small : nn::Module {
    std::shared_ptr<nn::Linear> proj, fc;
    explicit Small(std::uint64_t seed, std::int64_t width = 6) {
        manual_seed(seed);
        proj = register_module("proj", std::make_shared<nn::Linear>(width, width));
        auto head = register_module("head", std::make_shared<nn::Module>());
        fc = head->register_module("fc", std::make_shared<nn::Linear>(width, 3));
    }
};

// `model` adapted at proj and head.fc with r = 2, α = 4, its B drawn away from zero.
void adapt(Small& model, std::int64_t rank = 2) {
    nn::apply_lora(model, {"proj", "head.fc"}, nn::LoRAOptions().rank(rank).alpha(4));
    for (const auto& [path, adapter] : nn::adapted_layers(model)) {
        Tensor B = adapter->parameters()[1];
        B.mutable_data() = randn(B.shape()).data();
    }
}

}  // namespace

TEST_CASE("save_adapter writes PEFT's files, load_adapter puts the same adapter in another copy", "[nn][lora]") {
    TempDir dir;
    Small a(1);
    adapt(a);
    nn::save_adapter(a, dir.file("adapter"));
    const nlohmann::json config = nlohmann::json::parse(read_bytes(dir.file("adapter/adapter_config.json")));
    CHECK(config["peft_type"] == "LORA");
    CHECK(config["r"] == 2);
    CHECK(config["lora_alpha"] == 4.0);
    CHECK(config["target_modules"] == nlohmann::json({"proj", "head.fc"}));
    CHECK(config["fan_in_fan_out"] == false);
    const nn::SafetensorsFile file = nn::load_safetensors(dir.file("adapter/adapter_model.safetensors"));
    REQUIRE(file.tensors.size() == 4);
    CHECK(file.tensors[0].first == "base_model.model.proj.lora_A.weight");
    CHECK(file.tensors[3].first == "base_model.model.head.fc.lora_B.weight");
    CHECK(file.tensors[3].second.shape() == Shape{3, 2});  // (out, r)

    Small b(1);  // the same base
    manual_seed(99);  // and adapter draws of its own
    adapt(b);
    const Tensor x = randn({4, 6});
    CHECK_FALSE(bits_equal(b.fc->forward(b.proj->forward(x)).data(), a.fc->forward(a.proj->forward(x)).data()));
    nn::load_adapter(b, dir.file("adapter"));
    CHECK(bits_equal(b.fc->forward(b.proj->forward(x)).data(), a.fc->forward(a.proj->forward(x)).data()));
}

TEST_CASE("load_adapter refuses another model, another rank, a changed or missing file, untouched", "[nn][lora]") {
    TempDir dir;
    Small saved(1);
    adapt(saved);
    const std::string folder = dir.file("adapter");
    nn::save_adapter(saved, folder);

    Small target(2);
    adapt(target);
    const Array before = target.proj->lora()->A->weight.data();
    const auto untouched = [&] { return bits_equal(target.proj->lora()->A->weight.data(), before); };

    SECTION("another rank") {
        Small r3(2);
        adapt(r3, 3);
        CHECK_THROWS_WITH(nn::load_adapter(r3, folder), Contains("holds r 2") && Contains("adapters have r 3"));
    }
    SECTION("another model: other widths") {
        Small wide(2, 8);
        adapt(wide);
        CHECK_THROWS_WITH(nn::load_adapter(wide, folder), Contains("has shape (2, 6), the model's (2, 8)"));
    }
    SECTION("layers the model does not adapt") {
        Small fewer(2);
        nn::apply_lora(fewer, {"proj"}, nn::LoRAOptions().rank(2).alpha(4));
        CHECK_THROWS_WITH(nn::load_adapter(fewer, folder), Contains("holds 4 tensors, the model's adapters 2"));
    }
    SECTION("a config changed after saving") {
        std::string config = read_bytes(folder + "/adapter_config.json");
        config.replace(config.find("\"r\": 2"), 6, "\"r\": 4");
        write_bytes(folder + "/adapter_config.json", config);
        CHECK_THROWS_WITH(nn::load_adapter(target, folder), Contains("is not the config saved with"));
    }
    SECTION("a damaged tensor file") {
        std::string bytes = read_bytes(folder + "/adapter_model.safetensors");
        bytes[bytes.size() - 3] ^= 0x10;
        write_bytes(folder + "/adapter_model.safetensors", bytes);
        CHECK_THROWS_AS(nn::load_adapter(target, folder), ValueError);
    }
    SECTION("a missing config") {
        std::filesystem::remove(folder + "/adapter_config.json");
        CHECK_THROWS_WITH(nn::load_adapter(target, folder), Contains("adapter_config.json") && Contains("cannot read"));
    }
    CHECK(untouched());
}

TEST_CASE("save_adapter refuses a model without an adapter", "[nn][lora]") {
    TempDir dir;
    Small plain(1);
    CHECK_THROWS_WITH(nn::save_adapter(plain, dir.file("a")), Contains("has no LoRA adapter"));
    CHECK(dir.listing().empty());
}

TEST_CASE("save_adapter and load_adapter carry an adapter on parts of a fused output, and its parts", "[nn][lora]") {
    // qkv: Linear 4 → 4 + 2 + 2, adapted at q and v (r = 2): A (4, 4), B (6, 2) stacked as loralib's MergedLinear.
    struct Fused : nn::Module {
        std::shared_ptr<nn::Linear> qkv;
        Fused(std::uint64_t seed, std::vector<bool> adapted) {
            manual_seed(seed);
            qkv = register_module("qkv", std::make_shared<nn::Linear>(4, 8));
            nn::LoRA& lora = nn::add_lora(*qkv, nn::LoRAOptions().rank(2).alpha(4).parts({4, 2, 2}, adapted));
            lora.B->weight.mutable_data() = randn(lora.B->weight.shape()).data();
        }
    };
    TempDir dir;
    const std::string folder = dir.file("adapter");
    Fused a(1, {true, false, true});
    nn::save_adapter(a, folder);
    const nlohmann::json config = nlohmann::json::parse(read_bytes(folder + "/adapter_config.json"));
    CHECK(config["xgrad_lora_parts"]["qkv"]["sizes"] == nlohmann::json({4, 2, 2}));
    CHECK(config["xgrad_lora_parts"]["qkv"]["adapted"] == nlohmann::json({true, false, true}));
    const nn::SafetensorsFile file = nn::load_safetensors(folder + "/adapter_model.safetensors");
    REQUIRE(file.tensors.size() == 2);
    CHECK(file.tensors[0].first == "base_model.model.qkv.lora_A.weight");
    CHECK(file.tensors[0].second.shape() == Shape{4, 4});  // (k·r, in)
    CHECK(file.tensors[1].second.shape() == Shape{6, 2});  // (n_q + n_v, r)

    Fused b(1, {true, false, true});
    manual_seed(7);
    b.qkv->lora()->B->weight.mutable_data() = randn({6, 2}).data();
    const Tensor x = randn({3, 4});
    nn::load_adapter(b, folder);
    CHECK(bits_equal(b.qkv->forward(x).data(), a.qkv->forward(x).data()));

    // The same shapes, other parts adapted (k and v): refused by the config's parts, untouched.
    Fused other(1, {false, true, true});
    const Array before = other.qkv->lora()->B->weight.data();
    CHECK_THROWS_WITH(nn::load_adapter(other, folder), Contains("adapts 'qkv' in parts") &&
                                                           Contains("[true,false,true]") && Contains("[false,true,true]"));
    CHECK(bits_equal(other.qkv->lora()->B->weight.data(), before));
    // A plain adapter of the same layer: the config records parts the model's adapter has not.
    Small plain(1);
    adapt(plain);
    CHECK_THROWS_AS(nn::load_adapter(plain, folder), ValueError);
}
