// bench/data_shards.cpp — token data (data/) on the whole KJV: text → byte-pair ids → shards on
// disk, and windows read back from the memory map.
//
//   Tokenize/train     text::train_tokenizer on the KJV (4.40 MB), V 4,096 (GPT-4's split)
//   Tokenize/encode    that tokenizer's encode of the whole KJV (about 1.14 M ids)
//   Shards/write       data::write_train_val_shards: the ids as train.bin and val.bin (uint16,
//                      90/10), through io::AtomicFile with its fsyncs, in a temporary directory
//   Sampler/B/T        data::WindowSampler::next() over the memory-mapped train shard: B windows
//                      of T tokens, x and y copied out as int64. bytes_per_second counts the int64
//                      bytes delivered, 2·B·T·8 per call (x and y); the counter tokens/s the
//                      tokens of x alone, B·T per call.
// Goals: train + encode + write of the whole KJV ≤ 1 s; the sampler ≥ 1 GB/s on one core.
// Run: data_shards [Google Benchmark flags]; needs the bible program (bible-kjv) for the KJV.
// bench/compare.py --only T10 runs it and writes its rows into bench/README.md (t10_rows()).
// Legend: N tokens, V vocabulary, B batch, T block.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include <xgrad/data/sampler.hpp>
#include <xgrad/data/shards.hpp>
#include <xgrad/data/text_source.hpp>
#include <xgrad/text/train.hpp>

namespace {

namespace data = xgrad::data;
namespace text = xgrad::text;
constexpr std::int64_t kVocab = 4096;

// The KJV, its tokenizer, its ids and a directory for the shards; built once, untimed.
struct Kjv {
    std::string text;
    std::unique_ptr<text::Tokenizer> tok;
    std::vector<std::int64_t> ids;
    std::filesystem::path dir = std::filesystem::temp_directory_path() / ("xgrad_data_bench_" + std::to_string(::getpid()));
    std::unique_ptr<data::TokenShard> train;

    Kjv() : text(data::read_bible()) {
        tok = std::make_unique<text::Tokenizer>(text::train_tokenizer(text, kVocab));
        ids = tok->encode(text);
        std::filesystem::create_directories(dir);
        data::write_train_val_shards((dir / "train.bin").string(), (dir / "val.bin").string(), ids, kVocab, 1024, "KJV");
        train = std::make_unique<data::TokenShard>((dir / "train.bin").string(), kVocab);
    }
    ~Kjv() {
        train.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};
// Every benchmark calls it before its timed loop: the first call builds the whole setup (the bible
// program run, a training, an encoding, two shards written), which must not land in an iteration.
Kjv& kjv() {
    static Kjv k;
    return k;
}

void Tokenize_train(benchmark::State& state) {
    const Kjv& k = kjv();
    for (auto _ : state) benchmark::DoNotOptimize(text::train_tokenizer(k.text, kVocab));
    state.counters["bytes_of_text"] = double(k.text.size());
}

void Tokenize_encode(benchmark::State& state) {
    const Kjv& k = kjv();
    for (auto _ : state) benchmark::DoNotOptimize(k.tok->encode(k.text));
    state.counters["tokens"] = double(k.ids.size());
}

void Shards_write(benchmark::State& state) {
    const Kjv& k = kjv();
    const std::string train = (k.dir / "w_train.bin").string(), val = (k.dir / "w_val.bin").string();
    for (auto _ : state) benchmark::DoNotOptimize(data::write_train_val_shards(train, val, k.ids, kVocab, 1024, "KJV"));
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(1024 * 2 + k.ids.size() * 2));
}

void Sampler(benchmark::State& state) {
    const int B = int(state.range(0)), T = int(state.range(1));
    const Kjv& k = kjv();
    data::WindowSampler sampler(k.train->view(), data::WindowSamplerOptions(B, T).seed(1337));
    for (auto _ : state) benchmark::DoNotOptimize(sampler.next());
    state.SetBytesProcessed(std::int64_t(state.iterations()) * 2 * B * T * 8);  // x and y, int64
    state.counters["tokens/s"] = benchmark::Counter(double(state.iterations()) * B * T, benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(Tokenize_train)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(Tokenize_encode)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(Shards_write)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(Sampler)->Args({12, 64})->Args({64, 1024})->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
