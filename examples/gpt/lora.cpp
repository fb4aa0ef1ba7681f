// examples/gpt/lora.cpp — the --lora-* flags' adapters, and a LoRA run's outputs (lora.hpp).
#include "lora.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xgrad/nn/lora_file.hpp>

namespace gpt {

namespace {

const char* const kWords = "attention, q, k, v, mlp, all, embedding";

// The layer paths behind one word of --lora-targets, by the model's names (model.cpp, llama.cpp).
std::vector<std::string> paths_of(const std::string& word, const std::string& arch, bool tied) {
    const bool llama = arch == "llama";
    const std::vector<std::string> attention = llama ? std::vector<std::string>{"attention.wq", "attention.wk",
                                                                                "attention.wv", "attention.wo"}
                                                     : std::vector<std::string>{"attn.c_attn", "attn.c_proj"};
    const std::vector<std::string> mlp = llama ? std::vector<std::string>{"feed_forward.w1", "feed_forward.w2",
                                                                          "feed_forward.w3"}
                                               : std::vector<std::string>{"mlp.c_fc", "mlp.c_proj"};
    if (word == "attention") return attention;
    if (word == "mlp") return mlp;
    if (word == "all") {
        std::vector<std::string> every = attention;
        every.insert(every.end(), mlp.begin(), mlp.end());
        if (!tied) every.push_back(llama ? "output" : "lm_head");  // a tied head is the token table
        return every;
    }
    if (word == "embedding") return {llama ? "tok_embeddings" : "transformer.wte"};
    if (llama && (word == "q" || word == "k" || word == "v")) return {"attention.w" + word};  // its own Linear
    throw std::invalid_argument(fmt::format("--lora-targets: unknown target '{}'; a comma list of {}", word, kWords));
}

std::vector<std::string> split_words(const std::string& list) {
    std::vector<std::string> words;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = list.find(',', start);
        words.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return words;
        start = comma + 1;
    }
}

// gpt2's attn.c_attn adapted at its q, k, v parts (rows d, e, e; e = the K/V heads' width), then
// the Linear layers at `paths` whole, every other weight frozen (a second apply_lora keeps the
// first one's adapters trainable).
std::vector<std::string> adapt(LanguageModel& model, const LoRATargets& t, xgrad::nn::LoRAOptions options) {
    namespace nn = xgrad::nn;
    std::vector<std::string> adapted;
    if (!t.qkv.empty()) {
        const GPTConfig& m = model.config();
        const std::int64_t d = m.d, e = (m.n_kv_head > 0 ? m.n_kv_head : m.n_head) * (m.d / m.n_head);
        adapted = nn::apply_lora(model, {"attn.c_attn"}, nn::LoRAOptions(options).parts({d, e, e}, t.qkv));
    }
    if (!t.paths.empty()) {
        const std::vector<std::string> more = nn::apply_lora(model, t.paths, options);
        adapted.insert(adapted.end(), more.begin(), more.end());
    }
    return adapted;
}

}  // namespace

LoRATargets lora_targets(const std::string& list, const std::string& arch, bool tied) {
    const std::vector<std::string> words = split_words(list);
    LoRATargets t;
    std::array<bool, 3> parts{false, false, false};
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w.empty())
            throw std::invalid_argument(fmt::format("--lora-targets '{}': an empty target; a comma list of {}", list, kWords));
        if (std::count(words.begin(), words.begin() + std::ptrdiff_t(i), w) > 0)
            throw std::invalid_argument(fmt::format("--lora-targets '{}': '{}' given twice", list, w));
        if (arch != "llama" && (w == "q" || w == "k" || w == "v")) {
            parts[std::size_t(w == "q" ? 0 : w == "k" ? 1 : 2)] = true;
            continue;
        }
        for (std::string& p : paths_of(w, arch, tied))
            if (std::find(t.paths.begin(), t.paths.end(), p) == t.paths.end()) t.paths.push_back(std::move(p));
    }
    if (parts[0] || parts[1] || parts[2]) {
        if (std::find(t.paths.begin(), t.paths.end(), "attn.c_attn") != t.paths.end())
            throw std::invalid_argument(fmt::format("--lora-targets '{}': q, k, v adapt parts of attn.c_attn, which "
                                                    "attention and all adapt whole: pass one or the other", list));
        t.qkv.assign(parts.begin(), parts.end());
    }
    return t;
}

xgrad::nn::LoRAOptions lora_options(const Config& cfg) {
    return xgrad::nn::LoRAOptions().rank(cfg.lora_rank).alpha(cfg.lora_alpha > 0 ? cfg.lora_alpha : cfg.lora_rank);
}

void add_adapters(const Config& cfg, LanguageModel& model, bool print) {
    if (cfg.lora_rank == 0) return;
    const GPTConfig& m = model.config();
    const xgrad::nn::LoRAOptions options = lora_options(cfg);
    const LoRATargets targets = lora_targets(cfg.lora_targets, m.arch, m.tie);
    const std::vector<std::string> adapted = adapt(model, targets, options);
    if (!print) return;
    std::vector<std::string> names = targets.paths;
    if (!targets.qkv.empty()) {
        std::vector<std::string> parts;
        for (std::size_t j = 0; j < 3; ++j)
            if (targets.qkv[j]) parts.push_back(std::string(1, "qkv"[j]));
        names.insert(names.begin(), fmt::format("attn.c_attn's {}", fmt::join(parts, ", ")));
    }
    const xgrad::nn::ParameterCounts n = xgrad::nn::count_parameters(model);
    const double total = double(n.trainable + n.frozen);
    // Each adapted Linear (out, in) trains r·(in + out) numbers, A (r, in) and B (out, r); a table (V, d) r·(V + d).
    fmt::print("lora   r {}, α {} (s = α/r = {:g}) on {} layer{} ({}): trainable {} parameters ({:.2f}%), frozen {}; "
               "AdamW keeps state for the trainable ones alone\n",
               options.rank(), options.alpha(), options.scaling(), adapted.size(), adapted.size() == 1 ? "" : "s",
               fmt::join(names, ", "), n.trainable,
               100.0 * double(n.trainable) / total, n.frozen);
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

std::string lora_flags_mismatch(const std::string& path, const Config& cfg, bool resume) {
    nn::Metadata meta;
    try {
        meta = nn::load_safetensors(path).metadata;
    } catch (const std::exception&) {
        return "";  // the load's own message says what is wrong with the file
    }
    const auto saved = [&meta](const char* name) {
        const auto it = meta.find(std::string("flag.") + name);
        return it == meta.end() ? std::string() : it->second;
    };
    const std::string rank = saved("--lora-rank");
    if (rank.empty() && cfg.lora_rank > 0 && resume)  // --init-from a full run's checkpoint: its base, adapted anew
        return fmt::format("{} is a full run's checkpoint, without LoRA adapters: --resume continues it as it was "
                           "saved (without the --lora-* flags); to adapt it, start a run with --init-from {} and the "
                           "--lora-* flags", path, path);
    if (rank.empty()) return "";
    const std::string flags = fmt::format("--lora-rank {} --lora-alpha {} --lora-targets {}", rank,
                                          saved("--lora-alpha"), saved("--lora-targets"));
    if (cfg.lora_rank == 0)
        return fmt::format("{} is a LoRA run's checkpoint, saved with {}: pass the same flags", path, flags);
    const std::string mine = fmt::format("--lora-rank {} --lora-alpha {} --lora-targets {}", cfg.lora_rank,
                                         cfg.lora_alpha, cfg.lora_targets);
    return flags == mine ? "" : fmt::format("{} was saved with {}, this run has {}: pass the saved flags", path,
                                            flags, mine);
}

}  // namespace gpt
