// examples/gpt/sample.cpp — text from a trained GPT, as nanoGPT's sample.py: the checkpoint that
// examples/gpt wrote, the model rebuilt from the flags it records, its weights loaded with
// --init-from's checks, and --num-samples continuations of --prompt (nn::generate).
//
// Run:  build/examples/gpt_sample --checkpoint out/gpt/checkpoint.safetensors --prompt "And God said"
//       build/examples/gpt_sample --help
// With the training run's --seed, --temperature, --top-k and --kv-cache, the first sample is the
// one the run printed at its end (tests/gpt_resume.sh checks it). Control characters are printed
// as \uXXXX (text/render.hpp); --save FILE keeps the bytes as sampled.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <xgrad/core/parse.hpp>  // quoted_text
#include <xgrad/distributed/distributed.hpp>
#include <xgrad/io/atomic_file.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/text/render.hpp>
#include <xgrad/train/fingerprint.hpp>

#include "common/checkpoint.hpp"  // load_model_weights
#include "common/cli.hpp"         // parse_and_run
#include "common/outputs.hpp"     // check_output_files
#include "config.hpp"             // the training run's flag table
#include "generate.hpp"           // sample_text
#include "lora.hpp"               // add_adapters
#include "tokens.hpp"

using namespace xgrad;
using namespace gpt;

struct SampleConfig {
    std::string checkpoint = "out/gpt/checkpoint.safetensors";
    std::string prompt = "And God said";
    int max_new_tokens = 500;  // tokens per sample (characters for a --tokenizer char run)
    int num_samples = 1;
    double temperature = 0.8, top_p = 1.0;
    int top_k = 0;
    std::uint64_t seed = 1337;
    std::string kv_cache = "on";
    std::string save;  // --save: the samples' bytes as sampled ("": none)
};

// The training run's Config: its table of flags, set from the "flag.--x" values the checkpoint
// records (the model's shape, the tokenizer). A file without the model's shape (another program's
// checkpoint, such as char_mlp's) is refused by name, not left to fail in load_state_dict.
static Config saved_config(const std::string& path, const nn::Metadata& saved) {
    for (const char* flag : {"--arch", "--n-layer", "--n-head", "--d", "--block-size", "--tokenizer"})
        if (!saved.count(std::string("flag.") + flag))
            throw std::runtime_error(fmt::format("--checkpoint {}: records no gpt flag {}: not the checkpoint.safetensors "
                                                 "examples/gpt writes (its model.safetensors holds the weights alone; "
                                                 "another program's, such as char_mlp's?)", path, flag));
    Config cfg;
    CLI::App app;
    examples::FlagTable table(app);
    add_flags(table, cfg);
    examples::RunFlags flags;
    for (const auto& [key, value] : saved)
        if (key.rfind("flag.", 0) == 0) flags[key.substr(5)] = value;
    std::vector<std::string> args = table.args_of(flags);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
    cfg.resume = path;  // the flags' checks as for a run resumed from it (a LoRA run's adapters need their base: here)
    finish_flags(table, cfg);
    return cfg;
}

static int sample(const SampleConfig& s) {
    const std::filesystem::path save(s.save);
    if (!s.save.empty()) {  // before the work: a path in the way is refused now, not after the samples
        const std::string kind = io::non_regular_kind(s.save);
        if (!kind.empty())
            throw std::runtime_error(fmt::format("--save {}: '{}' is {}; --save names the file the samples are "
                                                 "written to", s.save, s.save, kind));
        examples::check_output_files(save.has_parent_path() ? save.parent_path().string() : ".",
                                     {save.filename().string()}, "--save");
    }
    const nn::SafetensorsFile file = nn::load_safetensors(s.checkpoint);
    const Config cfg = saved_config(s.checkpoint, file.metadata);
    Tokens tokens = cfg.tokenizer == "bpe"
                        ? Tokens::byte_pairs(load_bpe_beside(s.checkpoint, cfg.vocab_size, "--checkpoint"))
                        : Tokens::characters(Vocab::from_text(train::saved_vocabulary(s.checkpoint, file.metadata)));
    try {  // before the model is built: a prompt the vocabulary cannot encode is the flag's error
        tokens.encode(s.prompt);
    } catch (const std::exception& e) {
        throw std::invalid_argument(fmt::format("--prompt {}: {}", quoted_text(s.prompt), e.what()));
    }
    GPTConfig model_cfg = cfg.model;
    model_cfg.vocab = tokens.size();
    const std::unique_ptr<LanguageModel> model = make_model(model_cfg);
    add_adapters(cfg, *model, /*print=*/false);  // a LoRA run's checkpoint: the base and its adapters
    const int step = examples::load_model_weights(s.checkpoint, *model, {}, tokens.fingerprint_vocab(), tokens.identity());
    fmt::print("model  {} at step {}: {} parameters, V {} ({})\n", s.checkpoint, step, model->num_parameters(),
               tokens.size(), tokens.is_bpe() ? "byte pairs" : "characters");
    std::mt19937_64 rng(s.seed);
    const auto options = nn::GenerationOptions().max_new_tokens(s.max_new_tokens).temperature(s.temperature)
                             .top_k(s.top_k).top_p(s.top_p).use_cache(s.kv_cache == "on");
    // The terminal gets each sample as text::render_text shows it (control characters as \uXXXX,
    // ill-formed UTF-8 as U+FFFD); --save the bytes as sampled, each sample followed by the separator.
    std::string sampled;
    bool escaped = false;
    for (int i = 0; i < s.num_samples; ++i) {
        const std::string text = s.prompt + sample_text(*model, tokens, s.prompt, options, rng);
        const std::string shown = text::render_text(text);
        escaped = escaped || shown != text;
        fmt::print("{}\n---------------\n", shown);
        sampled += text + "\n---------------\n";
    }
    if (!s.save.empty()) {
        io::write_file_atomically(s.save, sampled, "gpt_sample --save");
        fmt::print("wrote {}{}\n", s.save, escaped ? " (the bytes as sampled; above, control characters as \\uXXXX)" : "");
    } else if (escaped) {
        fmt::print("(control characters shown as \\uXXXX; --save FILE writes the bytes as sampled)\n");
    }
    return 0;
}

int main(int argc, char** argv) {
    distributed::InitGuard mpi(&argc, &argv);  // parse_and_run asks for the world's size
    SampleConfig s;
    CLI::App app{"Sample text from a checkpoint that examples/gpt wrote (nanoGPT's sample.py)."};
    examples::FlagTable t(app);
    t.checkpoint("--checkpoint", s.checkpoint, "checkpoint.safetensors of a gpt run (--tokenizer bpe: tokenizer.bpe beside it)");
    t.text("--prompt", s.prompt, "text the samples continue (--tokenizer char: its characters must be in the vocabulary)");
    t.integer("--max-new-tokens", s.max_new_tokens, 0, INT_MAX, "tokens per sample (characters for a character run)");
    t.integer("--num-samples", s.num_samples, 1, 1000, "samples, each from where the generator's draws left off");
    t.real("--temperature", s.temperature, {0, std::numeric_limits<double>::infinity(), true}, "sampling temperature: logits are divided by it");
    t.integer("--top-k", s.top_k, 0, INT_MAX, "sample only among the k likeliest tokens (0: all)");
    t.real("--top-p", s.top_p, {0, 1, true}, "sample only among the likeliest tokens whose probabilities add up to p (1: all)");
    t.seed("--seed", s.seed, "seed of the samples' generator");
    t.path("--save", s.save, "write the samples to this file as sampled (the terminal shows control characters as \\uXXXX)");
    t.choice("--kv-cache", s.kv_cache, {"on", "off"}, "sample through a KV cache (on) or recompute (off); the same tokens");
    return examples::parse_and_run(app, "gpt_sample", argc, argv, [&] { return sample(s); });
}
