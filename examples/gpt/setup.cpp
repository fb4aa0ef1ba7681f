// examples/gpt/setup.cpp — before and after the loop (setup.hpp).
#include "setup.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>  // quoted_text
#include <xgrad/core/threads.hpp>
#include <xgrad/data/text_source.hpp>
#include <xgrad/nn/serialize.hpp>
#include <xgrad/train/state.hpp>

#include "common/checkpoint.hpp"
#include "common/profile.hpp"  // profile_files
#include "common/run_log.hpp"  // now_seconds
#include "lora.hpp"             // the adapter folder

namespace gpt {

examples::BatchSplit prepare_run(const Config& cfg) {
    set_num_threads(cfg.threads);
    const examples::BatchSplit batch_split = examples::split_batch(cfg.batch_size, cfg.grad_accum);
    if (batch_split.world > 1 || batch_split.accum > 1)
        fmt::print("{}\n", examples::world_line(batch_split, cfg.threads, "windows"));
    if (cfg.zero > 0)
        fmt::print("ZeRO   stage {}: each rank keeps the optimizer state{} of its own parameters only (the memory "
                   "figures before training are the whole model's; the table at the end gives this rank's share)\n",
                   cfg.zero, cfg.zero == 2 ? " and the reduced gradients" : "");
    std::error_code ec;
    if (distributed::rank() == 0) std::filesystem::create_directories(cfg.out, ec);
    if (ec) throw std::runtime_error(fmt::format("--out {}: cannot create the directory ({})", cfg.out, ec.message()));
    std::vector<std::string> files{"loss.csv",      "loss_ema.csv", "loss.gp",  "loss.png", "attention.csv",
                                   "attention.gp",  "attention.png", "checkpoint.safetensors", "model.safetensors",
                                   "sample.txt"};
    if (cfg.tokenizer == "bpe") files.push_back("tokenizer.bpe");
    if (cfg.profile > 0)
        for (const std::string& name : examples::profile_files()) files.push_back(name);
    if (distributed::rank() == 0) examples::check_output_files(cfg.out, files);
    return batch_split;
}

namespace {

// --tokenizer char: each byte of the text is a token; V is the bytes that occur. `parts`: the
// text split 90/10, or --data and --val-data whole.
TextData character_data(const Config& cfg, const std::string& text, const TextSplit& parts, const std::string& source) {
    Vocab vocab = Vocab::from_text(text);
    Split split = cfg.val_data.empty() ? split_ids(vocab.encode(text), int(cfg.model.block), source)
                                       : split_tokens(vocab.encode(std::string(parts.train)),
                                                      vocab.encode(std::string(parts.val)), int(cfg.model.block), source);
    fmt::print("data   {}: {} characters, V {} → train {} / val {} characters\n", source, text.size(), vocab.size(),
               split.train.size(), split.val.size());
    train::TextFingerprint fingerprint = train::fingerprint(vocab.chars, text);
    return {Tokens::characters(std::move(vocab)), std::move(split), std::move(fingerprint)};
}

// --tokenizer bpe: the text split first, the tokenizer learnt on the training part (or, with
// --resume and --init-from, read from beside the checkpoint), then both parts encoded.
TextData byte_pair_data(const Config& cfg, const std::string& text, const TextSplit& parts, const std::string& source) {
    fmt::print("data   {}: {} characters → train {} / val {} characters\n", source, text.size(), parts.train.size(),
               parts.val.size());
    const std::string& saved = cfg.resume.empty() ? cfg.init_from : cfg.resume;
    const double t0 = examples::now_seconds();
    Tokens tokens = Tokens::byte_pairs(saved.empty() ? train_bpe(parts.train, cfg.vocab_size)
                                                     : load_bpe_beside(saved, cfg.vocab_size,
                                                                       cfg.resume.empty() ? "--init-from" : "--resume"));
    const double t1 = examples::now_seconds();
    Split split = split_tokens(tokens.encode(std::string(parts.train)), tokens.encode(std::string(parts.val)),
                               int(cfg.model.block), source);
    const std::string how = saved.empty() ? fmt::format("learnt on the train characters in {:.1f} s", t1 - t0)
                                          : "read from " + tokenizer_beside(saved);
    fmt::print("tokens BPE V {} ({}; encoded in {:.1f} s) → train {} / val {} tokens, {:.2f} characters per token\n",
               tokens.size(), how, examples::now_seconds() - t1, split.train.size(), split.val.size(),
               double(parts.train.size()) / double(split.train.size()));
    train::TextFingerprint fingerprint = train::fingerprint(tokens.fingerprint_vocab(), text);
    fingerprint.tokenizer = tokens.identity();
    return {std::move(tokens), std::move(split), std::move(fingerprint)};
}

}  // namespace

TextData load_data(const Config& cfg) {
    std::string source = cfg.data.empty() ? "the KJV (bible -f \"gen1:1-rev22:21\")" : cfg.data;
    std::string text = cfg.data.empty() ? xgrad::data::read_bible() : xgrad::data::read_text_file(cfg.data);
    TextSplit parts = split_text(text);  // the first 90% trains, the rest validates
    if (!cfg.val_data.empty()) {         // --val-data: --data trains whole, --val-data validates
        const std::size_t train_bytes = text.size();
        text += xgrad::data::read_text_file(cfg.val_data);  // the run's text: both, for the fingerprint
        parts = {std::string_view(text).substr(0, train_bytes), std::string_view(text).substr(train_bytes)};
        source += " + " + cfg.val_data;
    }
    TextData d = cfg.tokenizer == "bpe" ? byte_pair_data(cfg, text, parts, source)
                                        : character_data(cfg, text, parts, source);
    if (cfg.prompt_given && cfg.sample > 0) {  // a prompt the text cannot encode is refused now, not after training
        try {
            d.tokens.encode(cfg.prompt);
        } catch (const std::exception& e) {
            throw std::invalid_argument(fmt::format("--prompt {}: {}", quoted_text(cfg.prompt), e.what()));
        }
    }
    return d;
}

data::WindowSamplerOptions sampler_options(const Config& cfg, const examples::BatchSplit& split) {
    return data::WindowSamplerOptions(cfg.batch_size, int(cfg.model.block))
        .seed(cfg.seed)
        .rank(split.rank)
        .world_size(split.world)
        .grad_accum(split.accum);
}

namespace {

// An earlier run's file in --out that this run does not write (a LoRA run without --merge-lora has
// no model.safetensors, a full run no adapter): removed, and said, so that none is taken for this run's.
void remove_stale_output(const std::string& dir, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        const std::string path = dir + "/" + name;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec)) continue;
        if (std::filesystem::remove(path, ec))
            fmt::print("removed {}: an earlier run's, not this run's\n", path);
        else
            fmt::print("warning: {} is an earlier run's, not this run's, and could not be removed ({})\n", path,
                       ec.message());
    }
}

// --init-from's weights into `model` (load_weights).
void load_init_weights(const Config& cfg, const examples::FlagTable& flags, LanguageModel& model, const TextData& d,
                       const nn::SafetensorsFile& file) {
    if (!file.metadata.count("train.step")) {  // a model.safetensors: the weights alone
        train::check_same_data(cfg.init_from, file.metadata, d.fingerprint, /*resume=*/false);
        model.load_state_dict(file.tensors);
        fmt::print("init   {}: the model's weights; a new AdamW and schedule, steps 0 to {}\n", cfg.init_from, cfg.steps);
        return;
    }
    const int saved = examples::load_model_weights(cfg.init_from, model, flags.values(examples::kModel),
                                                   d.fingerprint.vocab, d.fingerprint.tokenizer);
    fmt::print("init   {}: the weights after its step {}; a new AdamW and schedule, steps 0 to {}\n", cfg.init_from,
               saved, cfg.steps);
}

}  // namespace

void load_weights(const Config& cfg, const examples::FlagTable& flags, LanguageModel& model, const TextData& d) {
    if (cfg.init_from.empty()) return add_adapters(cfg, model);
    const nn::SafetensorsFile file = nn::load_safetensors(cfg.init_from);
    const bool saved_adapters = std::any_of(file.tensors.begin(), file.tensors.end(), [](const auto& t) {
        return t.first.find(".lora_A.") != std::string::npos || t.first.find(".lora_embedding_A.") != std::string::npos;
    });
    if (saved_adapters && cfg.lora_rank == 0)
        throw std::invalid_argument(fmt::format("--init-from {}: a LoRA run's checkpoint (the base and its adapters): "
                                                "pass its --lora-rank, --lora-alpha and --lora-targets, or --init-from "
                                                "the model.safetensors its --merge-lora wrote", cfg.init_from));
    try {
        if (!saved_adapters) load_init_weights(cfg, flags, model, d, file);  // the base, then adapters beside it
        add_adapters(cfg, model);
        if (saved_adapters) load_init_weights(cfg, flags, model, d, file);  // the base and its trained adapters
    } catch (const std::exception&) {
        const std::string lora = lora_flags_mismatch(cfg.init_from, cfg, /*resume=*/false);
        if (!lora.empty()) throw std::invalid_argument("--init-from " + lora);
        throw;
    }
}

int restore(const Config& cfg, const examples::FlagTable& flags, LanguageModel& model,
            const std::function<void(const optim::OptimizerState&)>& load_optimizer,
            optim::CosineWithWarmup& schedule, data::WindowSampler& sampler, const TextData& d) {
    if (cfg.resume.empty()) return 0;
    train::TrainingState state(model, load_optimizer);
    state.add("sampler", sampler);
    int start = 0;
    try {
        start = examples::load_checkpoint(cfg.resume, state, flags.values(examples::kResume), d.fingerprint);
    } catch (const std::exception&) {
        const std::string lora = lora_flags_mismatch(cfg.resume, cfg, /*resume=*/true);
        if (!lora.empty()) throw std::invalid_argument("--resume " + lora);
        throw;
    }
    schedule.set_step(start);
    fmt::print("resume {} at step {}\n", cfg.resume, start);
    return start;
}

void save(const Config& cfg, const examples::FlagTable& flags, const LanguageModel& model,
          train::TrainingState state, int step, const data::WindowSampler& sampler, const TextData& d,
          examples::FinalSaves& saves) {
    if (d.tokens.is_bpe())
        saves.attempt(cfg.out + "/tokenizer.bpe", [&] { d.tokens.tokenizer().save(cfg.out + "/tokenizer.bpe"); });
    saves.attempt(cfg.out + "/checkpoint.safetensors", [&] {
        state.add("sampler", sampler).step(step);
        examples::save_checkpoint(cfg.out + "/checkpoint.safetensors", state, flags.values(examples::kResume),
                                  d.fingerprint);
    });
    if (cfg.lora_rank > 0) save_adapter_folder(cfg, model, saves);
    else remove_stale_output(cfg.out + "/adapter", {"adapter_model.safetensors", "adapter_config.json"});
    if (cfg.lora_rank > 0 && !cfg.merge_lora) {  // the adapter is the run's model
        remove_stale_output(cfg.out, {"model.safetensors"});
        return;
    }
    saves.attempt(cfg.out + "/model.safetensors", [&] {
        const NamedTensors weights = cfg.lora_rank > 0 ? nn::merged_state_dict(model) : model.state_dict();
        const std::string bad = train::first_non_finite(weights);
        if (!bad.empty()) throw std::runtime_error(fmt::format("'{}' holds a NaN or an infinity (the run diverged)", bad));
        nn::Metadata model_meta = train::fingerprint_metadata(d.fingerprint);
        model_meta["format"] = "pt";
        nn::save_safetensors(cfg.out + "/model.safetensors", weights, model_meta);
    });
}

}  // namespace gpt
