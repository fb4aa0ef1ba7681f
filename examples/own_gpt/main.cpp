// examples/own_gpt/main.cpp — nanoGPT's train.py on xgrad's kit: the Psalms as byte-pair tokens in
// llm.c shards, a one-block GPT, AdamW with a cosine schedule, a checkpoint to resume from, and a
// sampled continuation. Copy this file and the CMakeLists.txt beside it to a new folder.
//
//   own_gpt [OUT]            OUT (default out/own_gpt) gets tokenizer.bpe, train.bin, val.bin (made
//                            once, reused after) and state.safetensors, the state at step kSaveAt
//   own_gpt [OUT] --resume   continues from OUT/state.safetensors: prints the same lines as the
//                            first run from step kSaveAt + 1 on (tests/consumer.sh compares them)
//
// The model is own_project's (nanoGPT's GPT with one block), its positions up to T:
//   ids (B, t) → x = wte[ids] + wpe[0..t)  →  x + attn(ln_1(x))  →  x + fc2(gelu(fc1(ln_2(x))))
//   → logits (B, t, V) = ln_f(x) · wteᵀ                              t ≤ T
// Legend: B batch, T block (tokens of context), V vocabulary, d width, H heads.
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <xgrad/text/train.hpp>  // train_tokenizer (library xgrad::text)
#include <xgrad/xgrad.hpp>       // tensors, nn (CausalLM, generate), optim, data (shards, sampler), train

using namespace xgrad;
namespace F = nn::functional;

const char* const kBooks = "psa1:1-psa150:6";  // the Psalms, as Debian's `bible -f` names a range
constexpr std::int64_t V = 512;         // tokens: the 256 bytes + 256 learned merges
constexpr int B = 16, T = 64;           // windows per step; tokens of context per window
constexpr std::int64_t d = 96, H = 4;   // channels per token; attention heads (d / H = 24 each)
constexpr int kSteps = 200;             // optimizer steps
constexpr int kSaveAt = 100;            // the step whose training state is saved (--resume's start)
constexpr int kWarmup = 10;             // steps of linear warmup, then cosine decay to kMinLr
constexpr double kLr = 6e-3, kMinLr = 6e-4;  // AdamW's learning rate at the peak, at the end
constexpr int kPrintEvery = 20;         // steps between loss lines
constexpr std::size_t kValWindows = 64; // windows of T tokens the val loss is the mean over

// The tokenizer, and the text's ids as OUT/train.bin (the first 90%) and OUT/val.bin: made by the
// first run, read back by the next ones. The tokenizer is written last, so its file means all are.
text::Tokenizer tokenizer_and_shards(const std::string& out) {
    const std::string path = out + "/tokenizer.bpe";
    if (std::filesystem::exists(path)) return text::Tokenizer::load(path);
    const std::string corpus = data::read_bible(kBooks);             // one verse a line: 245 KB for the Psalms
    text::Tokenizer tokenizer = text::train_tokenizer(corpus, V);    // 256 merges, GPT-4's split
    const data::SplitCounts n = data::write_train_val_shards(out + "/train.bin", out + "/val.bin",
                                                             tokenizer.encode(corpus), V, T, kBooks);
    fmt::print("{}: {} bytes → {} train + {} val tokens of V = {}\n", kBooks, corpus.size(), n.train, n.val, V);
    tokenizer.save(path);
    return tokenizer;
}

class GPT : public nn::CausalLM {
public:
    GPT() {
        wte = register_module("wte", std::make_shared<nn::Embedding>(V, d));  // (V, d)
        wpe = register_module("wpe", std::make_shared<nn::Embedding>(T, d));  // (T, d) learned positions
        ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(d));
        attn = register_module("attn", std::make_shared<nn::CausalSelfAttention>(
                                           d, H, nn::CausalSelfAttentionOptions().bias(false)));
        ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(d));
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(d, 4 * d));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(4 * d, d));
        ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(d));
        head = register_module("head", std::make_shared<nn::Linear>(d, V, /*bias=*/false));
        nn::tie_weights(*head, *wte);  // one (V, d) parameter: the token table and the head
        for (Tensor* w : {&wte->weight, &wpe->weight}) nn::init::normal_(*w, 0.0, 0.02);  // GPT-2's
    }
    std::int64_t block_size() const override { return T; }  // nn::generate crops the context to T
    Tensor forward(const IndexTensor& ids) const override {  // ids (B, t), t ≤ T → logits (B, t, V)
        Tensor x = add(wte->forward(ids), wpe->forward(IndexTensor::arange(ids.size(1))));  // (B, t, d)
        x = add(x, attn->forward(ln_1->forward(x)));
        x = add(x, fc2->forward(F::gelu(fc1->forward(ln_2->forward(x)))));
        return head->forward(ln_f->forward(x));
    }
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::LayerNorm> ln_1, ln_2, ln_f;
    std::shared_ptr<nn::CausalSelfAttention> attn;
    std::shared_ptr<nn::Linear> fc1, fc2, head;
};

// The ids whose bytes end a line: a verse's end. With byte pairs "\n" is seldom a token of its own
// (".\n" and ";\n" are merged), so stopping at id 10 alone would never stop.
std::vector<std::int64_t> line_ends(const text::Tokenizer& tokenizer) {
    std::vector<std::int64_t> ids;
    for (std::int64_t id = 0; id < V; ++id)
        if (const std::string bytes = tokenizer.decode({id}); !bytes.empty() && bytes.back() == '\n') ids.push_back(id);
    return ids;
}

int run(const std::string& out, bool resume) {
    set_num_threads(1);
    manual_seed(0);                   // the weights' initialisation
    std::filesystem::create_directories(out);
    const text::Tokenizer tokenizer = tokenizer_and_shards(out);
    const data::TokenShard train_ids(out + "/train.bin", V), val_ids(out + "/val.bin", V);  // mmap

    GPT model;
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(kLr).weight_decay(0.1));  // λ per step
    optim::CosineWithWarmup sched(opt, kWarmup, kSteps, kMinLr);
    data::WindowSampler sampler(train_ids.view(), data::WindowSamplerOptions(B, T).seed(1337));  // B offsets a step
    std::mt19937_64 rng(0);          // nn::generate's draws
    train::TrainingState state(model, opt);
    state.scheduler(sched).generator(rng).add("sampler", sampler);  // what a resume restores, with model, opt
    const std::string checkpoint = out + "/state.safetensors";
    int step = resume ? train::load(checkpoint, state) : 0;  // the steps already taken
    fmt::print("{} parameters, {} steps from step {}\n", model.num_parameters(), kSteps, step);

    while (step < kSteps) {
        const data::Batch batch = sampler.next_batch();    // x (B, T), y (B, T) int64, y one ahead
        Tensor logits = model.forward(batch.x);            // (B, T, V)
        Tensor loss = F::cross_entropy(logits, batch.y);   // () nats, the mean over B·T positions
        opt.zero_grad();
        loss.backward();
        opt.step();
        sched.step();                                      // the learning rate of the next step
        if (++step % kPrintEvery == 0 || step == 1)  // lr_at(step − 1): the rate this step used
            fmt::print("step {:>3}  loss {:.4f} nats  lr {:.2e}\n", step, loss.item(), sched.lr_at(step - 1));
        if (step == kSaveAt) train::save(checkpoint, state.step(step));
    }

    NoGradGuard no_grad;
    const data::Batch val = data::fixed_windows(val_ids.view(), kValWindows, T);  // the same every run
    fmt::print("val loss {:.4f} nats (ln V = {:.4f}, a uniform guess)\n",
               F::cross_entropy(model.forward(val.x), val.y).item(), std::log(double(V)));
    const std::string prompt = "Psa23:1 The LORD is my shepherd;";
    // At most 40 new tokens, each drawn from softmax(logits / 0.8) over the 40 likeliest ids, cut to
    // the fewest that hold 95% of the probability; a '\n' (a verse's end) stops it.
    const auto options = nn::GenerationOptions().max_new_tokens(40).temperature(0.8).top_k(40).top_p(0.95)
                             .stop_tokens(line_ends(tokenizer));
    const std::vector<std::int64_t> ids = nn::generate(model, tokenizer.encode(prompt), options, rng);
    const std::string sample = prompt + tokenizer.decode(ids);
    fmt::print("sample: {}\n", sample.substr(0, sample.find('\n')));  // the verse, without its '\n'
    return 0;
}

int main(int argc, char** argv) {
    std::string out = "out/own_gpt";
    bool resume = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--resume") resume = true;
        else out = argv[i];
    }
    try {
        return run(out, resume);
    } catch (const std::exception& e) {  // a missing state to resume, an unwritable OUT, ...
        fmt::print(stderr, "own_gpt: error: {}\n", e.what());
        return 1;
    }
}
