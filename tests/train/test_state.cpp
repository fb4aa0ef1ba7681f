// tests/train/test_state.cpp — train::save / train::load: a resume continues bit for bit; the file's
// layout; every refusal by its message, each leaving the live objects as they were; the data
// fingerprint (vocabulary, text, tokenizer); load_model_weights.
// Legend: B = 4 ids per batch, V = 5 (TinyNet's table), out = 2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <xgrad/core/profiler.hpp>  // memory_allocated: the Array bytes a save holds
#include <xgrad/io/checksum.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include <xgrad/train/state.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

namespace {

// A data sampler's state as a string map: where it is in its epoch, and which epoch.
struct Sampler {
    std::int64_t position = 0, epoch = 0;
    train::StringMap state_dict() const { return {{"position", std::to_string(position)}, {"epoch", std::to_string(epoch)}}; }
    void load_state_dict(const train::StringMap& m) {
        if (!m.count("position") || !m.count("epoch")) throw std::runtime_error("Sampler: position or epoch missing");
        position = std::stoll(m.at("position")), epoch = std::stoll(m.at("epoch"));
    }
    std::int64_t next() {  // an id in [0, 5)
        if (++position == 5) position = 0, ++epoch;
        return position;
    }
};

// A tiny run: TinyNet, AdamW, a cosine schedule, the batch generator and the sampler.
struct Run {
    TinyNet model;
    optim::AdamW opt{model.named_parameters(), optim::AdamWOptions(0.05).weight_decay(0.1)};
    optim::CosineWithWarmup sched{opt, /*warmup=*/2, /*total=*/20, /*min_lr=*/0.005};
    std::mt19937_64 rng{42};
    Sampler sampler;
    int step = 0;

    // ids (B,) from the sampler and the generator; loss = mean (model(ids) − 0.5)²; one AdamW step.
    void train(int steps) {
        for (int k = 0; k < steps; ++k, ++step) {
            const std::int64_t a = sampler.next(), b = std::int64_t(rng() % 5);
            const IndexTensor ids(std::vector<std::int64_t>{a, b, (a + b) % 5, 4 - b});
            const Tensor loss = nn::functional::mse_loss(model.forward(ids), full({4, 2}, 0.5));
            opt.zero_grad();
            loss.backward();
            opt.step();
            sched.step();
        }
    }
    train::TrainingState state() {
        return train::TrainingState(model, opt).scheduler(sched).generator(rng).add("sampler", sampler).step(step);
    }
};

// The file at `path` with one metadata value replaced and/or element 0 of one tensor set to v,
// saved again with a right checksum: only the training state's own checks can tell.
std::string tampered(const TempDir& dir, const std::string& path, const std::string& key, const std::string& value,
                     const std::string& tensor = "", real v = 0) {
    nn::SafetensorsFile f = nn::load_safetensors(path);
    if (!key.empty()) f.metadata[key] = value;
    for (auto& [name, t] : f.tensors) {
        if (name != tensor) continue;
        Array a = t.data();
        a.data()[0] = v;
        t = from_array(std::move(a));
    }
    const std::string out = dir.file("tampered.safetensors");
    nn::save_safetensors(out, f.tensors, f.metadata);
    return out;
}

}  // namespace

TEST_CASE("train: saved after 3 steps, loaded into fresh objects, 4 more steps match the run that went on",
          "[train][state]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(3);
    train::save(path, run.state(), {{"flag.--lr", "0.05"}});
    run.train(4);

    manual_seed(2);  // other initial weights: all must come from the file
    Run fresh;
    fresh.rng.seed(7);
    train::TrainingState state = fresh.state();
    REQUIRE(train::load(path, state, train::LoadOptions().expect("flag.", {{"--lr", "0.05"}}, "")) == 3);
    CHECK(fresh.sched.current_step() == 3);
    CHECK(fresh.sampler.position == 3);
    CHECK(*fresh.opt.param_groups()[0].lr == fresh.sched.lr_at(3));
    fresh.step = 3;
    fresh.train(4);
    const NamedTensors a = run.model.state_dict(), b = fresh.model.state_dict();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].first);
        CHECK(bits_equal(a[i].second, b[i].second));
    }
    CHECK(fresh.rng == run.rng);
    CHECK(fresh.sampler.epoch == run.sampler.epoch);
    CHECK(fresh.sampler.position == run.sampler.position);
}

TEST_CASE("train: the file's tensors and metadata, under PyTorch's names", "[train][state]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(2);
    train::save(path, run.state(), {{"flag.--lr", "0.05"}, {"data.note", "x"}});
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    std::vector<std::string> names;
    for (const auto& [name, t] : f.tensors) names.push_back(name);
    CHECK(names == std::vector<std::string>{"model.emb.weight", "model.fc.weight", "model.fc.bias",
                                            "optim.emb.weight.exp_avg", "optim.emb.weight.exp_avg_sq",
                                            "optim.fc.weight.exp_avg", "optim.fc.weight.exp_avg_sq",
                                            "optim.fc.bias.exp_avg", "optim.fc.bias.exp_avg_sq"});
    CHECK(bits_equal(f.tensors[1].second, run.model.fc->weight));
    std::ostringstream rng_text;
    rng_text << run.rng;
    CHECK(f.metadata.at("train.step") == "2");
    CHECK(f.metadata.at("train.rng") == rng_text.str());
    CHECK(f.metadata.at("scheduler.step") == "2");
    CHECK(f.metadata.at("sampler.position") == "2");
    CHECK(f.metadata.at("sampler.epoch") == "0");
    CHECK(f.metadata.at("optim.fc.weight.step") == "2");
    CHECK(f.metadata.at("optim.optimizer") == "AdamW");
    CHECK(f.metadata.at("flag.--lr") == "0.05");
    CHECK(f.metadata.at("data.note") == "x");
}

// ---- saving without a copy of the optimizer's state ------------------------------------------------
namespace {

// One Linear (3000 → 3000) with AdamW stepped once: m and v are 9·10⁶ elements each, 34 MiB in
// float; a copy of them would add as many bytes to the Arrays live during the save.
struct WideRun {
    nn::Linear fc{3000, 3000};
    optim::AdamW opt{fc.named_parameters(), optim::AdamWOptions(1e-3)};
    WideRun() {
        fc.forward(ones({1, 3000})).sum().backward();
        opt.step();
    }
};

}  // namespace

TEST_CASE("train: save writes the optimizer's moments from where they live, with no copy of them",
          "[train][state][regression]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    WideRun run;
    const std::int64_t moments = 2 * std::int64_t(run.fc.weight.numel() + run.fc.bias.numel()) * std::int64_t(sizeof(real));
    auto peak_above_now = [&](const std::function<void()>& save) {  // Array bytes the save held at its peak
        profiler::reset_peak_memory_stats();
        const std::int64_t before = profiler::memory_allocated();
        save();
        return profiler::max_memory_allocated() - before;
    };
    const std::int64_t live = peak_above_now([&] { train::save(path, train::TrainingState(run.fc, run.opt).step(1)); });
    INFO("the save from the live optimizer held " << live << " bytes above its start; the moments are " << moments);
    CHECK(live < moments / 4);
    const nn::Module& model = run.fc;
    const optim::Optimizer& opt = run.opt;  // saving only
    const std::int64_t from_const = peak_above_now([&] { train::save(path, train::TrainingState(model, opt).step(1)); });
    CHECK(from_const < moments / 4);
    const std::int64_t from_copy = peak_above_now([&] { train::save(path, train::TrainingState(model, opt.state_dict()).step(1)); });
    CHECK(from_copy >= moments);  // the copy the live saves avoid
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    REQUIRE(f.tensors.size() == 6);
    CHECK(f.tensors[2].first == "optim.weight.exp_avg");
    CHECK(bits_equal(f.tensors[2].second, from_array(run.opt.state_of("weight")->exp_avg)));
}

TEST_CASE("train: a state saved from the live optimizer is the file its state_dict() copy gives, byte for byte",
          "[train][state]") {
    TempDir dir;
    manual_seed(1);
    Run run;
    run.train(3);
    train::save(dir.file("live.safetensors"), run.state());
    const optim::OptimizerState copy = run.opt.state_dict();
    train::TrainingState from_copy(run.model, copy);
    train::save(dir.file("copy.safetensors"),
                from_copy.scheduler(run.sched).generator(run.rng).add("sampler", run.sampler).step(3));
    CHECK(read_bytes(dir.file("live.safetensors")) == read_bytes(dir.file("copy.safetensors")));
}

TEST_CASE("train: a negative step count is refused when it is set, not when the file is loaded",
          "[train][state][regression]") {
    Run run;
    train::TrainingState state(run.model, run.opt);
    REQUIRE_THROWS_AS(state.step(-5), ValueError);
    REQUIRE_THROWS_WITH(state.step(-5), Catch::Matchers::Contains("TrainingState::step: -5 steps taken"));
    CHECK(state.step(0).step() == 0);
}

TEST_CASE("train: save refuses a NaN or an infinity anywhere, naming it, and leaves the file as it was",
          "[train][state][regression]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(1);
    train::save(path, run.state());
    const std::string good = read_bytes(path);
    for (real bad : {kNaN, kInf}) {
        Run diverged;
        diverged.train(1);
        diverged.model.fc->bias.mutable_data()(1) = bad;
        CHECK(message_of<std::runtime_error>([&] { train::save(path, diverged.state()); }) ==
              path + ": not saved: 'model.fc.bias' holds a NaN or an infinity (the run diverged); the file is left as it was");
        CHECK(read_bytes(path) == good);
    }
    // A sharded optimizer's gathered state with an infinite moment.
    optim::OptimizerState os = run.opt.state_dict();
    os.tensors[2].second = full(os.tensors[2].second.shape(), kInf);
    CHECK_THAT(message_of<std::runtime_error>([&] { train::save(path, train::TrainingState(run.model, os)); }),
               Contains("'optim." + os.tensors[2].first + "' holds a NaN or an infinity"));
    CHECK(read_bytes(path) == good);
    // The state's own keys are not the caller's.
    CHECK_THAT(message_of<std::runtime_error>([&] { train::save(path, run.state(), {{"sampler.position", "9"}}); }),
               Contains("the metadata key 'sampler.position' is the training state's own"));
    CHECK_THAT(message_of<std::runtime_error>([&] { train::save(path, run.state().add("sampler", run.sampler)); }),
               Contains("a second component named 'sampler'"));
    CHECK(read_bytes(path) == good);
}

TEST_CASE("train: load refuses a state no run saves, naming the path and the key, and changes nothing",
          "[train][state][regression]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(5);
    train::save(path, run.state());
    run.train(1);  // the live objects differ from the file's
    const Snapshot model_before = snapshot(run.model);
    const optim::OptimizerState opt_before = run.opt.state_dict();
    const std::mt19937_64 rng_before = run.rng;
    const std::string weight = "fc.weight";
    auto refusal = [&](const std::string& file, const train::LoadOptions& options = train::LoadOptions()) {
        train::TrainingState state = run.state();
        const std::string msg = message_of<std::exception>([&] { train::load(file, state, options); });
        require_unchanged(run.model, model_before);
        CHECK(bits_equal(run.opt.state_dict().tensors[0].second, opt_before.tensors[0].second));
        CHECK(run.opt.state_dict().metadata == opt_before.metadata);
        CHECK(run.rng == rng_before);
        CHECK(run.sched.current_step() == 6);
        CHECK(run.sampler.position == 1);
        return msg;
    };
    for (const char* step : {"5abc", "1e3", "+5", " 5", "-1", "2147483648", ""}) {
        INFO("train.step = '" << step << "'");
        CHECK_THAT(refusal(tampered(dir, path, "train.step", step)),
                   Contains(dir.file("tampered.safetensors") + ": 'train.step' = ") && Contains("is not a step count"));
    }
    std::ostringstream text;
    text << run.rng;
    for (const std::string& state : {text.str() + " 1", "+" + text.str(), text.str() + "x", std::string("1 2 3")})
        CHECK_THAT(refusal(tampered(dir, path, "train.rng", state)),
                   Contains("'train.rng' = ") && Contains("is not a std::mt19937_64 state as operator<< writes it"));
    CHECK_THAT(refusal(tampered(dir, path, "scheduler.step", "x")), Contains("'scheduler.step' = 'x' is not a step count"));
    CHECK_THAT(refusal(tampered(dir, path, "", "", "model." + weight, kNaN)),
               Contains("'model.fc.weight' holds a NaN or an infinity, which a run never saves"));
    CHECK_THAT(refusal(tampered(dir, path, "optim." + weight + ".step", "6")),
               Contains("'optim.fc.weight.step' = 6 is more than the run's 5 steps ('train.step')"));
    CHECK_THAT(refusal(path, train::LoadOptions().max_step(4)), Contains("'train.step' = 5 is beyond this run's last step 4"));
    // The optimizer's own checks.
    CHECK_THAT(refusal(tampered(dir, path, "", "", "optim." + weight + ".exp_avg_sq", -1e-3)),
               Contains("'" + weight + ".exp_avg_sq' holds -0.001 at element 0") && Contains(">= 0"));
    CHECK_THAT(refusal(tampered(dir, path, "", "", "optim." + weight + ".exp_avg", kInf)),
               Contains("'" + weight + ".exp_avg' holds inf"));
    // A component's load that throws: the model is put back, and the message names the path and the
    // component (the sampler's own message knows neither).
    CHECK_THAT(refusal(tampered(dir, path, "sampler.epoch", "x")),
               Contains(dir.file("tampered.safetensors") + ": component 'sampler' (its 'sampler.*' metadata): ") &&
                   Contains("stoll"));
    // A file saved without the component: refused by name before anything is loaded.
    {
        nn::SafetensorsFile f = nn::load_safetensors(path);
        f.metadata.erase("sampler.position");
        f.metadata.erase("sampler.epoch");
        const std::string without = dir.file("without-sampler.safetensors");
        nn::save_safetensors(without, f.tensors, f.metadata);
        CHECK(refusal(without) == without + ": records no component 'sampler' (no 'sampler.*' metadata): it was "
                                            "saved without one");
    }
    // The untouched file loads.
    train::TrainingState state = run.state();
    CHECK(train::load(path, state) == 5);
    CHECK(run.sampler.position == 5 % 5);
}

TEST_CASE("train: expected metadata must match, naming the key, both values and the caller's advice",
          "[train][state]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(2);
    train::save(path, run.state(), {{"flag.--lr", "0.05"}, {"flag.--steps", "20"}});
    const Snapshot before = snapshot(run.model);
    train::TrainingState state = run.state();
    const train::LoadOptions other =
        train::LoadOptions().expect("flag.", {{"--lr", "0.05"}, {"--steps", "30"}}, "pass {name} {saved}, not {value}");
    CHECK(message_of<std::runtime_error>([&] { train::load(path, state, other); }) ==
          path + ": saved with --steps 20, but this run has --steps 30; pass --steps 20, not 30");
    const train::LoadOptions newer = train::LoadOptions().expect("flag.", {{"--arch", "gpt2"}}, "");
    CHECK(message_of<std::runtime_error>([&] { train::load(path, state, newer); }) ==
          path + ": records no --arch (a file written before the key existed), so this run cannot be checked "
                 "against it: train anew");
    require_unchanged(run.model, before);
}

TEST_CASE("train: a file without 'train.step' is not a training state, and load_model_weights loads the weights alone",
          "[train][state]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors"), weights = dir.file("model.safetensors");
    manual_seed(1);
    Run run;
    run.train(3);
    train::save(path, run.state(), {{"flag.--d", "3"}});
    nn::save_safetensors(weights, run.model.state_dict());
    manual_seed(2);
    Run fresh;
    train::TrainingState state = fresh.state();
    const std::string not_state = weights + ": not a training checkpoint (no 'train.step'): a file train::save wrote, "
                                            "not a model's weights alone";
    CHECK(message_of<std::runtime_error>([&] { train::load(weights, state); }) == not_state);
    CHECK(message_of<std::runtime_error>([&] { train::load(dir.file("none.safetensors"), state); }) ==
          dir.file("none.safetensors") + ": no training state to resume: the file does not exist (a first run writes it)");
    CHECK(message_of<std::runtime_error>([&] { train::load_model_weights(weights, fresh.model); }) == not_state);

    const Snapshot before = snapshot(fresh.model);
    CHECK_THAT(message_of<std::runtime_error>([&] {
                   train::load_model_weights(path, fresh.model, train::LoadOptions().expect("flag.", {{"--d", "4"}}, ""));
               }),
               Contains("saved with --d 3, but this run has --d 4"));
    require_unchanged(fresh.model, before);
    REQUIRE(train::load_model_weights(path, fresh.model, train::LoadOptions().expect("flag.", {{"--d", "3"}}, "")) == 3);
    CHECK(bits_equal(fresh.model.fc->weight, run.model.fc->weight));
    CHECK(fresh.opt.state_dict().tensors.empty());  // the optimizer, rng and sampler start afresh
    CHECK(fresh.rng == std::mt19937_64(42));
    CHECK(fresh.sampler.position == 0);
}

TEST_CASE("train: an optimizer load that throws leaves the model and the components as they were",
          "[train][state][regression]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    run.train(3);
    train::save(path, run.state());
    manual_seed(2);
    Run fresh;
    const Snapshot before = snapshot(fresh.model);
    bool called = false;
    train::TrainingState state(fresh.model, [&](const optim::OptimizerState& s) {
        called = true;
        CHECK(s.tensors.size() == 6);  // the whole state, as a sharded optimizer's collective load gets it
        throw std::runtime_error("rank 1: no such parameter");
    });
    state.generator(fresh.rng).scheduler(fresh.sched).add("sampler", fresh.sampler);
    CHECK(message_of<std::runtime_error>([&] { train::load(path, state); }) == "rank 1: no such parameter");
    CHECK(called);
    require_unchanged(fresh.model, before);
    CHECK(fresh.sampler.position == 0);
    CHECK(fresh.rng == std::mt19937_64(42));
    CHECK(fresh.sched.current_step() == 0);
    // A state made for saving (a const model, a gathered optimizer state) cannot be loaded into.
    const optim::OptimizerState os = fresh.opt.state_dict();
    train::TrainingState save_only(static_cast<const nn::Module&>(fresh.model), os);
    CHECK_THAT(message_of<std::logic_error>([&] { train::load(path, save_only); }), Contains("for saving only"));
}

// ==== the data fingerprint ==========================================================================================

TEST_CASE("train: a resume on another vocabulary, text or tokenizer is refused, and every byte round-trips",
          "[train][fingerprint][regression]") {
    TempDir dir;
    const std::string path = dir.file("state.safetensors");
    manual_seed(1);
    Run run;
    std::string all_bytes;  // the vocabulary of a binary file: 0x00..0xff, not UTF-8
    for (int b = 0; b < 256; ++b) all_bytes.push_back(char(b));
    const std::string text("\xff\x00 binary \x80 text", 16);
    const train::TextFingerprint data = train::fingerprint(all_bytes, text);
    CHECK(data.text_bytes == 16);
    CHECK(data.text_fnv1a == io::fnv1a64(text));
    train::save(path, run.state(), train::fingerprint_metadata(data));
    const nn::Metadata saved = nn::load_safetensors(path).metadata;
    CHECK(saved.at("data.vocab_hex").substr(0, 8) == "00010203");
    CHECK(saved.at("data.text_bytes") == "16");
    CHECK(saved.at("data.text_fnv1a64") == fmt::format("{:016x}", io::fnv1a64(text)));
    CHECK(saved.count("data.tokenizer") == 0);
    train::TrainingState state = run.state();
    REQUIRE(train::load(path, state, train::LoadOptions().data(data)) == 0);
    REQUIRE(train::load(path, state) == 0);  // a caller without data skips the check

    auto refusal = [&](const train::LoadOptions& options) {
        return message_of<std::runtime_error>([&] { train::load(path, state, options); });
    };
    // The same length and V, two bytes swapped: ids 65 and 66 would exchange meanings.
    std::string swapped = all_bytes;
    std::swap(swapped[65], swapped[66]);
    CHECK_THAT(refusal(train::LoadOptions().data(train::fingerprint(swapped, text))),
               Contains("vocabulary mismatch") && Contains("token id 65 meant 'A' and would now mean 'B'") &&
                   Contains("resume on the text the checkpoint was trained on"));
    CHECK_THAT(refusal(train::LoadOptions().vocabulary(train::fingerprint(swapped, text))),
               Contains("train on a text with the same characters"));
    // The same vocabulary, another text of the same length; vocabulary() does not look at the text.
    const train::TextFingerprint other = train::fingerprint(all_bytes, std::string("\xff\x00 binary \x80 TEXT", 16));
    CHECK_THAT(refusal(train::LoadOptions().data(other)), Contains("text mismatch") && Contains("a text of 16 bytes"));
    CHECK(train::load(path, state, train::LoadOptions().vocabulary(other)) == 0);
    // Another tokenizer, named both ways.
    train::TextFingerprint bpe = data;
    bpe.tokenizer = "bpe:0123";
    CHECK_THAT(refusal(train::LoadOptions().data(bpe)),
               Contains("tokenizer mismatch: the checkpoint's ids are those of one byte per token, this run's of 'bpe:0123'"));
    // A file saved without its vocabulary cannot be checked, so it is refused.
    train::save(path, run.state());
    CHECK_THAT(refusal(train::LoadOptions().data(data)), Contains("records no vocabulary ('data.vocab_hex' missing)"));
}
