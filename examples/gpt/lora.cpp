// examples/gpt/lora.cpp — the --lora-* flags' adapters, and a LoRA run's outputs (lora.hpp).
#include "lora.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xgrad/nn/lora_file.hpp>

namespace gpt {

namespace {

// The Linear paths behind one word of --lora-targets, by the model's names (model.cpp, llama.cpp).
std::vector<std::string> paths_of(const std::string& word, const std::string& arch, bool tied) {
    const bool llama = arch == "llama";
    const std::vector<std::string> attention = llama ? std::vector<std::string>{"attention.wq", "attention.wk",
                                                                                "attention.wv", "attention.wo"}
                                                     : std::vector<std::string>{"attn.c_attn", "attn.c_proj"};
    const std::vector<std::string> mlp = llama ? std::vector<std::string>{"feed_forward.w1", "feed_forward.w2",
                                                                          "feed_forward.w3"}
                                               : std::vector<std::string>{"mlp.c_fc", "mlp.c_proj"};
    const std::string head = llama ? "output" : "lm_head";
    if (word == "attention") return attention;
    if (word == "mlp") return mlp;
    if (word == "all") {
        std::vector<std::string> every = attention;
        every.insert(every.end(), mlp.begin(), mlp.end());
        if (!tied) every.push_back(head);  // a head tied to the token table is the table: nn::add_lora refuses it
        return every;
    }
    if (word == "embedding")
        throw std::invalid_argument("--lora-targets embedding: nn::apply_lora adapts Linear layers only in this "
                                    "build, not the token table; pass attention, mlp or all");
    throw std::invalid_argument(fmt::format("--lora-targets: unknown target '{}'; a comma list of attention, mlp, "
                                            "all, embedding", word));
}

}  // namespace

std::vector<std::string> lora_target_paths(const std::string& list, const std::string& arch, bool tied) {
    std::vector<std::string> words, paths;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = list.find(',', start);
        words.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (words[i].empty())
            throw std::invalid_argument(fmt::format("--lora-targets '{}': an empty target; a comma list of attention, "
                                                    "mlp, all, embedding", list));
        for (std::size_t j = 0; j < i; ++j)
            if (words[j] == words[i])
                throw std::invalid_argument(fmt::format("--lora-targets '{}': '{}' given twice", list, words[i]));
        for (std::string& p : paths_of(words[i], arch, tied))
            if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(std::move(p));
    }
    return paths;
}

xgrad::nn::LoRAOptions lora_options(const Config& cfg) {
    return xgrad::nn::LoRAOptions().rank(cfg.lora_rank).alpha(cfg.lora_alpha > 0 ? cfg.lora_alpha : cfg.lora_rank);
}

void add_adapters(const Config& cfg, LanguageModel& model, bool print) {
    if (cfg.lora_rank == 0) return;
    const GPTConfig& m = model.config();
    const xgrad::nn::LoRAOptions options = lora_options(cfg);
    const std::vector<std::string> targets = lora_target_paths(cfg.lora_targets, m.arch, m.tie);
    const std::vector<std::string> adapted = xgrad::nn::apply_lora(model, targets, options);  // freezes the rest
    if (!print) return;
    const xgrad::nn::ParameterCounts n = xgrad::nn::count_parameters(model);
    const double total = double(n.trainable + n.frozen);
    // Each adapted Linear (out, in) trains r·(in + out) numbers: A (r, in) and B (out, r).
    fmt::print("lora   r {}, α {} (s = α/r = {:g}) on {} Linear layers ({}): trainable {} parameters ({:.2f}%), "
               "frozen {}; AdamW keeps state for the trainable ones alone\n",
               options.rank(), options.alpha(), options.scaling(), adapted.size(), fmt::join(targets, ", "),
               n.trainable, 100.0 * double(n.trainable) / total, n.frozen);
}

NamedTensors merged_weights(const Config& cfg, const LanguageModel& model) {
    const std::unique_ptr<LanguageModel> copy = make_model(model.config());
    add_adapters(cfg, *copy, /*print=*/false);
    copy->load_state_dict(model.state_dict());
    for (const auto& [path, layer] : xgrad::nn::adapted_layers(*copy)) layer->lora()->merge();  // W += s·B·A
    NamedTensors merged;
    for (auto& [name, t] : copy->state_dict())
        if (name.find(".lora_A.") == std::string::npos && name.find(".lora_B.") == std::string::npos)
            merged.emplace_back(name, t);
    return merged;
}

std::uintmax_t folder_bytes(const std::string& dir) {
    std::error_code ec;
    std::uintmax_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (entry.is_regular_file()) bytes += entry.file_size();
    return bytes;
}

void save_adapter_folder(const Config& cfg, const LanguageModel& model, examples::FinalSaves& saves) {
    const std::string dir = cfg.out + "/adapter";
    saves.attempt(dir, [&] {
        xgrad::nn::save_adapter(model, dir);
        fmt::print("adapter {}: adapter_model.safetensors and adapter_config.json, {} bytes (PEFT's layout)\n", dir,
                   folder_bytes(dir));
    });
}

}  // namespace gpt
