// tests/nn/test_lora_file.cpp — nn::save_adapter and nn::load_adapter: PEFT's two files, a round
// trip into another copy of the model, each refusal leaving the model untouched, an adapter on parts,
// and a folder as PEFT writes it (no checksum), loaded with the opt-out, its keys that change the math refused.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
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

// The folder PEFT's save_pretrained writes for `model`'s adapters: its safetensors file (F32, no
// xgrad checksum, metadata {"format": "pt"}, tensors in name order) and `config`, PEFT's keys.
void write_peft_folder(const std::string& folder, const Small& model, const nlohmann::json& config) {
    std::map<std::string, Tensor> tensors;  // name order, as safetensors' Python writer sorts them
    for (const auto& [path, adapter] : nn::adapted_layers(model)) {
        tensors["base_model.model." + path + ".lora_A.weight"] = adapter->parameters()[0];
        tensors["base_model.model." + path + ".lora_B.weight"] = adapter->parameters()[1];
    }
    nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
    std::string data;
    for (const auto& [name, t] : tensors) {
        const std::size_t begin = data.size();
        for (const real v : t.data()) {
            const float f = float(v);
            data.append(reinterpret_cast<const char*>(&f), sizeof f);
        }
        header[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {begin, data.size()}}};
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    const std::uint64_t n = text.size();
    std::memcpy(bytes.data(), &n, 8);  // little-endian hosts (load_safetensors refuses others)
    std::filesystem::create_directories(folder);
    write_bytes(folder + "/adapter_model.safetensors", bytes + text + data);
    write_bytes(folder + "/adapter_config.json", config.dump(2));
}

// PEFT 0.13's adapter_config.json for Small's adapter (r 2, α 4 at proj and head.fc).
nlohmann::json peft_config() {
    return nlohmann::json::parse(R"({
  "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "small", "bias": "none",
  "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true, "layer_replication": null,
  "layers_pattern": null, "layers_to_transform": null, "loftq_config": {}, "lora_alpha": 4,
  "lora_dropout": 0.0, "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null,
  "peft_type": "LORA", "r": 2, "rank_pattern": {}, "revision": null, "target_modules": ["head.fc", "proj"],
  "task_type": null, "use_dora": false, "use_rslora": false})");
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

// ---- defects found by a hostile trial ----------------------------------------------------------

TEST_CASE("load_adapter refuses a model whose adapter is merged, untouched", "[nn][lora][regression]") {
    // Loaded into a merged model, W would keep the old update and unmerge() would subtract the new one.
    TempDir dir;
    Small saved(1);
    adapt(saved);
    nn::save_adapter(saved, dir.file("adapter"));
    Small target(2);
    adapt(target);
    for (const auto& [path, adapter] : nn::adapted_layers(target)) adapter->merge();
    const Array W = target.proj->weight.data(), A = target.proj->lora()->A->weight.data();
    CHECK_THROWS_WITH(nn::load_adapter(target, dir.file("adapter")), Contains("'proj'") && Contains("unmerge() first"));
    CHECK(bits_equal(target.proj->weight.data(), W));
    CHECK(bits_equal(target.proj->lora()->A->weight.data(), A));
}

TEST_CASE("a save_adapter that fails leaves the folder's previous adapter loadable", "[nn][lora][regression]") {
    // A tensor file that cannot be written (a full disk; here the file-size limit) must not leave a new
    // config beside the old tensors, which neither adapter would load.
    TempDir dir;
    const std::string folder = dir.file("adapter");
    Small first(1, 64);
    adapt(first, 2);
    nn::save_adapter(first, folder);
    Small second(1, 64);
    adapt(second, 3);
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit small = old;
    small.rlim_cur = 1500;  // the config (~400 B) fits, the tensors (~2.4 KB) do not
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string refusal;
    try {
        nn::save_adapter(second, folder);
    } catch (const std::exception& e) {
        refusal = e.what();
    }
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK_THAT(refusal, Contains("file size limit"));
    Small copy(1, 64);
    adapt(copy, 2);
    nn::load_adapter(copy, folder);
    CHECK(bits_equal(copy.proj->lora()->B->weight.data(), first.proj->lora()->B->weight.data()));
}

TEST_CASE("save_adapter names the option in which two adapters differ", "[nn][lora][regression]") {
    // Adapters that differ in dropout alone: the refusal names the dropouts, not only r and alpha.
    TempDir dir;
    Small model(1);
    nn::add_lora(*model.proj, nn::LoRAOptions().rank(2).alpha(4));
    nn::add_lora(*model.fc, nn::LoRAOptions().rank(2).alpha(4).dropout(0.1));
    CHECK_THROWS_WITH(nn::save_adapter(model, dir.file("a")), Contains("dropout 0.1") && Contains("dropout 0"));
}

TEST_CASE("load_adapter loads a folder PEFT wrote with require_checksum(false), and refuses it by default",
          "[nn][lora][regression]") {
    TempDir dir;
    const std::string folder = dir.file("peft");
    Small a(1);
    adapt(a);
    write_peft_folder(folder, a, peft_config());
    Small b(1);
    manual_seed(99);
    adapt(b);
    const Array before = b.proj->lora()->A->weight.data();
    CHECK_THROWS_WITH(nn::load_adapter(b, folder), Contains("has no xgrad checksum") &&
                      Contains("pass nn::LoadOptions().require_checksum(false) to nn::load_adapter"));
    CHECK(bits_equal(b.proj->lora()->A->weight.data(), before));
    nn::load_adapter(b, folder, nn::LoadOptions().require_checksum(false));
    const Tensor x = randn({4, 6});
    CHECK(bits_equal(b.fc->forward(b.proj->forward(x)).data(), a.fc->forward(a.proj->forward(x)).data()));
}

TEST_CASE("load_adapter with require_checksum(false) still checks a checksum or CRC-32 that is present",
          "[nn][lora]") {
    TempDir dir;
    const std::string folder = dir.file("adapter");
    Small a(1);
    adapt(a);
    nn::save_adapter(a, folder);
    std::string config = read_bytes(folder + "/adapter_config.json");
    config.replace(config.find("\"lora_alpha\": 4.0"), 17, "\"lora_alpha\": 8.0");
    write_bytes(folder + "/adapter_config.json", config);
    CHECK_THROWS_WITH(nn::load_adapter(a, folder, nn::LoadOptions().require_checksum(false)),
                      Contains("is not the config saved with"));
}

TEST_CASE("load_adapter refuses PEFT's options that change the math, naming the key", "[nn][lora]") {
    TempDir dir;
    Small a(1);
    adapt(a);
    const Array before = a.proj->lora()->A->weight.data();
    const std::vector<std::pair<std::string, nlohmann::json>> cases{
        {"fan_in_fan_out", true}, {"bias", "lora_only"}, {"modules_to_save", {"head.fc"}}, {"use_dora", true},
        {"rank_pattern", {{"proj", 4}}}, {"alpha_pattern", {{"proj", 8}}}, {"peft_type", "LOHA"}};
    for (const auto& [key, value] : cases) {
        nlohmann::json config = peft_config();
        config[key] = value;
        const std::string folder = dir.file(key);
        write_peft_folder(folder, a, config);
        INFO(key);
        CHECK_THROWS_WITH(nn::load_adapter(a, folder, nn::LoadOptions().require_checksum(false)),
                          Contains("sets \"" + key + "\": " + value.dump()) && Contains("cannot load it"));
    }
    CHECK(bits_equal(a.proj->lora()->A->weight.data(), before));
}
