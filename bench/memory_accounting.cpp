// bench/memory_accounting.cpp — W6: the bytes the default examples/char_mlp run accounts for.
//
// bench/compare.py measures the peak resident set size (RSS) of the real `char_mlp` run and
// sets it against what that run needs to hold at its peak, counted here from the same data
// and the same model (char_mlp's defaults, and its own data code):
//
//   data         the word split (std::string objects and their characters) and the example
//                windows X (N, block) and Y (N,) as int64, for train, val and test
//   model        parameters + gradients + AdamW state, from the optimizer's memory_report()
//                after one training step (gradients stay alive between steps)
//   activations  the larger of
//                  train: every array one training step's graph holds — the forward outputs
//                         e (B, block, d), h0 (B, block·d), fc1 (B, H), tanh (B, H), logits
//                         (B, V), the loss, and cross_entropy's saved softmax (B, V)
//                  eval:  the same forward arrays for one evaluation chunk of 8192 rows
//                         (no graph is kept, but they are alive together inside forward)
//
// Prints one JSON object; all sizes in bytes.
#include <cstdio>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include <xgrad/optim/optim.hpp>

using namespace xgrad;
using namespace char_mlp;

namespace {

// Bytes of a word list: the std::string objects, plus the characters that do not fit in the
// string's own small buffer (libstdc++ keeps up to 15 in place).
std::size_t words_bytes(const std::vector<std::string>& words) {
    std::size_t bytes = words.capacity() * sizeof(std::string);
    for (const auto& w : words)
        if (w.capacity() > 15) bytes += w.capacity() + 1;
    return bytes;
}

std::size_t index_bytes(const Examples& e) { return (e.X.numel() + e.Y.numel()) * sizeof(std::int64_t); }

// The forward arrays of one batch, as CharMLP::forward makes them, plus the softmax
// cross_entropy keeps for its backward and the loss itself.
std::size_t forward_bytes(const CharMLP& model, const IndexTensor& x, const IndexTensor& y) {
    Tensor e = model.emb->forward(x);                                   // (B, block, d)
    Tensor h0 = e.reshape({std::int64_t(x.shape()[0]), -1});            // (B, block·d)
    Tensor a = model.fc1->forward(h0);                                  // (B, H)
    Tensor h1 = a.tanh();                                               // (B, H)
    Tensor logits = model.fc2->forward(h1);                             // (B, V)
    Tensor loss = nn::functional::cross_entropy(logits, y);             // ()
    const std::size_t probs = logits.numel();                           // saved softmax (B, V)
    return (e.numel() + h0.numel() + a.numel() + h1.numel() + logits.numel() + loss.numel() + probs) *
           sizeof(real);
}

}  // namespace

int main(int argc, char** argv) {
    // char_mlp's defaults (examples/char_mlp/main.cpp, struct Config).
    const std::string path = argc > 1 ? argv[1] : "/usr/share/dict/words";
    const int block = 5, d = 24, hidden = 256;
    const std::size_t batch = 128, eval_chunk = 8192;
    const std::uint64_t seed = 42;

    manual_seed(seed);
    const Split words = split_words(load_words(path), seed);
    const Examples train = make_examples(words.train, block);
    const Examples val = make_examples(words.val, block);
    const Examples test = make_examples(words.test, block);
    const std::size_t data = words_bytes(words.train) + words_bytes(words.val) + words_bytes(words.test) +
                             index_bytes(train) + index_bytes(val) + index_bytes(test);

    CharMLP model(kVocab, block, d, hidden);
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(3e-3).weight_decay(0.0));
    std::mt19937_64 rng(seed);
    Batch b = sample_batch(train, batch, rng);
    Tensor loss = nn::functional::cross_entropy(model.forward(b.x), b.y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    const optim::MemoryRow t = opt.memory_report().total();

    const std::size_t train_act = forward_bytes(model, b.x, b.y);
    std::size_t eval_act = 0;
    {
        NoGradGuard no_grad;
        Batch chunk = slice(val, 0, std::min(eval_chunk, val.size()));
        eval_act = forward_bytes(model, chunk.x, chunk.y);
    }
    const std::size_t activations = std::max(train_act, eval_act);
    const std::size_t total = data + t.param_bytes + t.grad_bytes + t.state_bytes() + activations;
    std::printf(
        "{\"name\": \"W6_accounting\", \"data_bytes\": %zu, \"param_bytes\": %zu, \"grad_bytes\": %zu, "
        "\"state_bytes\": %zu, \"train_activation_bytes\": %zu, \"eval_activation_bytes\": %zu, "
        "\"accounted_bytes\": %zu}\n",
        data, t.param_bytes, t.grad_bytes, t.state_bytes(), train_act, eval_act, total);
    return 0;
}
