// nn/lora_file.cpp — save_adapter and load_adapter (nn/lora_file.hpp): PEFT's two files, the
// tensors by nn/serialize and the config by nlohmann-json, tied together by the config's CRC-32
// (a folder PEFT wrote has neither checksum: loaded with LoadOptions().require_checksum(false)).
#include <xgrad/nn/lora_file.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <xgrad/core/error.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/io/atomic_file.hpp>
#include <xgrad/io/checksum.hpp>
#include <xgrad/nn/lora.hpp>
#include <xgrad/nn/serialize.hpp>

namespace xgrad::nn {

namespace {

constexpr const char* kTensorFile = "adapter_model.safetensors";
constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kConfigCrcKey = "xgrad.adapter_config_crc32";
constexpr const char* kPartsKey = "xgrad_lora_parts";  // not PEFT's: loralib's MergedLinear layout

std::string join(const std::string& dir, const char* file) { return (std::filesystem::path(dir) / file).string(); }

using Layers = std::vector<std::pair<std::string, LoRAAdapter*>>;

// One tensor of the adapter file: PEFT's name, the model's tensor, and whether the file holds its
// transpose (an Embedding's Aᵀ (V, r) is PEFT's lora_embedding_A (r, V)).
struct Entry {
    std::string name;
    Tensor tensor;
    bool transposed;
    Shape file_shape() const { return transposed ? Shape{tensor.shape()[1], tensor.shape()[0]} : tensor.shape(); }
};

// The adapters' tensors under PEFT's names, and the options they share (ValueError, naming `op`, if
// they differ). PEFT names a Linear's lora_A.weight and lora_B.weight (modules), an Embedding's
// lora_embedding_A and lora_embedding_B (parameters: no ".weight").
std::vector<Entry> adapter_entries(const Layers& layers, LoRAOptions& shared, const char* op) {
    std::vector<Entry> entries;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& [path, adapter] = layers[i];
        const LoRAOptions& o = adapter->options();
        if (i == 0) shared = o;
        const auto describe = [](const LoRAOptions& a) {
            return fmt::format("r {}, alpha {}, dropout {}, use_rslora {}", a.rank(), a.alpha(), a.dropout(),
                               a.use_rslora());
        };
        check(describe(o) == describe(shared), op, "the adapter of '{}' ({}) differs from the first one's ({}): one "
              "adapter file holds one configuration", path, describe(o), describe(shared));
        const std::string prefix = path.empty() ? "base_model.model" : "base_model.model." + path;
        if (const auto* linear = dynamic_cast<const LoRA*>(adapter)) {
            entries.push_back({prefix + ".lora_A.weight", linear->A->weight, false});
            entries.push_back({prefix + ".lora_B.weight", linear->B->weight, false});
        } else {
            const auto& table = dynamic_cast<const LoRAEmbedding&>(*adapter);
            entries.push_back({prefix + ".lora_embedding_A", table.A->weight, true});
            entries.push_back({prefix + ".lora_embedding_B", table.B->weight, false});
        }
    }
    return entries;
}

// An adapter's parts as the config records them, {"sizes": [...], "adapted": [...]}; null without parts.
nlohmann::json parts_json(const LoRAOptions& o) {
    if (o.part_sizes().empty()) return nullptr;
    return {{"sizes", o.part_sizes()}, {"adapted", o.part_adapted()}};
}

std::string config_text(const LoRAOptions& o, const Layers& layers) {
    nlohmann::json targets = nlohmann::json::array();
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [path, adapter] : layers) {
        targets.push_back(path);
        if (nlohmann::json p = parts_json(adapter->options()); !p.is_null()) parts[path] = p;
    }
    nlohmann::json config = {{"peft_type", "LORA"}, {"r", o.rank()}, {"lora_alpha", o.alpha()},
                             {"lora_dropout", o.dropout()}, {"use_rslora", o.use_rslora()},
                             {"target_modules", targets}, {"fan_in_fan_out", false},
                             {"bias", "none"}, {"inference_mode", true}};
    if (!parts.empty()) config[kPartsKey] = parts;
    return config.dump(2) + "\n";
}

// Throws ValueError unless the config records, for every adapted layer, the parts its adapter has.
void check_parts(const nlohmann::json& config, const Layers& layers, const std::string& config_path) {
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& saved = config.contains(kPartsKey) ? config[kPartsKey] : none;
    for (const auto& [path, adapter] : layers) {
        const nlohmann::json mine = parts_json(adapter->options());
        const nlohmann::json theirs = saved.is_object() && saved.contains(path) ? saved[path] : nlohmann::json();
        check(mine == theirs, "load_adapter", "'{}' adapts '{}' in parts {}, the model's adapter in parts {} "
              "(\"{}\": sizes of the output's parts and which are adapted; null: the whole output)", config_path,
              path, theirs.dump(), mine.dump(), kPartsKey);
    }
}

// Throws ValueError for a config key of PEFT's that changes the adapted layer's math in a way this
// adapter does not compute; keys that do not (task_type, revision, layers_to_transform, ...) are ignored.
void check_peft_keys(const nlohmann::json& config, const std::string& config_path) {
    const auto refuse_unless = [&](bool ok, const char* key, const char* why) {
        if (!ok)
            throw ValueError(fmt::format("load_adapter: '{}' sets \"{}\": {}, which {}; xgrad's LoRA cannot load it",
                                         config_path, key, config[key].dump(), why));
    };
    const auto set = [&](const char* key) { return config.contains(key) && !config[key].is_null(); };
    const auto empty = [&](const char* key) { return !set(key) || config[key].empty(); };
    if (set("peft_type"))
        refuse_unless(config["peft_type"] == "LORA", "peft_type", "is another method than LoRA");
    if (set("fan_in_fan_out"))
        refuse_unless(config["fan_in_fan_out"] == false, "fan_in_fan_out", "stores W as (in, out), GPT-2's Conv1D");
    if (set("bias"))
        refuse_unless(config["bias"] == "none", "bias", "trains the base's biases too (their values are not in "
                      "an adapter xgrad reads)");
    refuse_unless(empty("modules_to_save"), "modules_to_save", "saves whole modules beside the adapter");
    if (set("use_dora"))
        refuse_unless(config["use_dora"] == false, "use_dora", "is DoRA, a magnitude vector beside B·A");
    refuse_unless(empty("rank_pattern"), "rank_pattern", "gives some layers another r");
    refuse_unless(empty("alpha_pattern"), "alpha_pattern", "gives some layers another alpha");
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ValueError(fmt::format("load_adapter: cannot read '{}' (missing?); an adapter folder holds {} and {}",
                                          path, kTensorFile, kConfigFile));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

void save_adapter(const Module& model, const std::string& dir) {
    const auto layers = adapted_layers(model);
    check(!layers.empty(), "save_adapter", "the model has no LoRA adapter (nn::apply_lora or nn::add_lora first)");
    LoRAOptions options;
    NamedTensors tensors;
    for (const Entry& e : adapter_entries(layers, options, "save_adapter"))
        tensors.emplace_back(e.name, e.transposed ? transpose(e.tensor.detach(), 0, 1) : e.tensor);
    const std::string config = config_text(options, layers);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::runtime_error(fmt::format("save_adapter: cannot create the folder '{}': {}", dir, ec.message()));
    // Each file is written whole or not at all; the pair too: the config replaces the old one only
    // after the tensor file has (a full disk while writing either leaves the previous pair).
    io::AtomicFile config_file(join(dir, kConfigFile), "save_adapter");
    config_file.write(config);
    save_safetensors(join(dir, kTensorFile), tensors, {{kConfigCrcKey, fmt::format("{:08x}", io::crc32(config))}});
    config_file.commit();
}

void load_adapter(Module& model, const std::string& dir, const LoadOptions& options) {
    const std::string tensor_path = join(dir, kTensorFile), config_path = join(dir, kConfigFile);
    // The checksum, if present, is verified either way; whether it may be absent is decided below.
    const SafetensorsFile file = load_safetensors(tensor_path, LoadOptions().require_checksum(false));
    const std::string config = read_text(config_path);
    const auto crc = file.metadata.find(kConfigCrcKey);
    check(!options.require_checksum() || (file.verified && crc != file.metadata.end()), "load_adapter",
          "'{}' has no {}, so the folder cannot be verified: written by another tool, such as PEFT's "
          "save_pretrained? To load it unverified, pass nn::LoadOptions().require_checksum(false) to "
          "nn::load_adapter", tensor_path, file.verified ? fmt::format("metadata key '{}' tying it to '{}'",
          kConfigCrcKey, config_path) : std::string("xgrad checksum"));
    check(crc == file.metadata.end() || crc->second == fmt::format("{:08x}", io::crc32(config)), "load_adapter",
          "'{}' is not the config saved with '{}' (its CRC-32 differs from the one the tensor file records)",
          config_path, tensor_path);
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(config);
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("load_adapter: '{}' is not JSON: {}", config_path, e.what()));
    }
    check(json.is_object(), "load_adapter", "'{}' is not a JSON object", config_path);
    check_peft_keys(json, config_path);
    const auto layers = adapted_layers(model);
    check(!layers.empty(), "load_adapter", "the model has no LoRA adapter: apply nn::apply_lora with the targets "
                                           "of '{}' first", config_path);
    for (const auto& [path, adapter] : layers)  // a merged W holds the old update, which unmerge() would miss
        check(!adapter->merged(), "load_adapter", "the adapter of '{}' is merged into its weight: unmerge() first",
              path);
    LoRAOptions mine;
    const std::vector<Entry> targets = adapter_entries(layers, mine, "load_adapter");
    const auto number = [&](const char* key) {
        check(json.contains(key) && json[key].is_number(), "load_adapter", "'{}' has no number '{}'", config_path, key);
        return json[key].get<double>();
    };
    check(number("r") == double(mine.rank()) && number("lora_alpha") == mine.alpha() &&
              number("lora_dropout") == mine.dropout() && json.value("use_rslora", false) == mine.use_rslora(),
          "load_adapter", "'{}' holds r {}, alpha {}, dropout {}, use_rslora {}; the model's adapters have r {}, "
          "alpha {}, dropout {}, use_rslora {}", config_path, number("r"), number("lora_alpha"), number("lora_dropout"),
          json.value("use_rslora", false), mine.rank(), mine.alpha(), mine.dropout(), mine.use_rslora());
    check_parts(json, layers, config_path);
    std::map<std::string, const Tensor*> saved;
    for (const auto& [name, tensor] : file.tensors) saved[name] = &tensor;
    for (const Entry& e : targets) {
        const auto it = saved.find(e.name);
        check(it != saved.end(), "load_adapter", "'{}' has no tensor '{}' (an adapter of another model?)",
              tensor_path, e.name);
        check(it->second->shape() == e.file_shape(), "load_adapter", "'{}': '{}' has shape {}, the model's {}",
              tensor_path, e.name, shape_str(it->second->shape()), shape_str(e.file_shape()));
    }
    check(saved.size() == targets.size(), "load_adapter", "'{}' holds {} tensors, the model's adapters {}: it "
          "adapts layers this model does not adapt", tensor_path, saved.size(), targets.size());
    for (const Entry& e : targets) {
        Tensor t = e.tensor;
        if (e.transposed) t.mutable_data() = transpose(*saved.at(e.name), 0, 1).data();
        else t.mutable_data() = saved.at(e.name)->data();
    }
}

}  // namespace xgrad::nn
