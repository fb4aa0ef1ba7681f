// examples/own_project/main.cpp — a program of your own on xgrad: a one-block transformer that
// learns a short text, character by character. Copy this file and the CMakeLists.txt beside it
// to a new folder; that CMakeLists.txt finds an installed xgrad (or builds xgrad's sources) and
// builds this file twice: own_project (real = float, for training) and own_project_f64 (real =
// double, what a gradcheck of an op of your own needs). Both run the same code; it exits 1 if a
// check fails (the two mask conventions disagree, the first loss is not within 0.1 of ln V) or
// the loss does not fall, which is how tests/consumer.sh runs it.
//
// The model is nanoGPT's GPT with one block:
//   ids (B, T) int64 → x = wte[ids] + wpe[0..T)    (B, T, d)
//   x = x + attn(ln_1(x))                          (B, T, d)   causal self-attention, H heads
//   x = x + fc2(gelu(fc1(ln_2(x))))                (B, T, d)   d → 4d → d
//   logits = ln_f(x) · wteᵀ                        (B, T, V)   the head tied to the token table
// Legend: B batch, T time, V vocabulary, d width, H heads.
// ref: Karpathy, nanoGPT model.py; Radford et al. 2019 (GPT-2).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <xgrad/xgrad.hpp>  // the whole library; or <xgrad/core/ops.hpp>, <xgrad/nn/nn.hpp>, ...

using namespace xgrad;
namespace F = nn::functional;

const std::string kText = "In the beginning God created the heaven and the earth. And the earth was without "
                          "form, and void; and darkness was upon the face of the deep. ";
constexpr std::int64_t B = 8, T = 16, d = 32, H = 4;

class TinyGPT : public nn::Module {
public:
    explicit TinyGPT(std::int64_t V) {
        wte = register_module("wte", std::make_shared<nn::Embedding>(V, d));  // (V, d), N(0, 1) as PyTorch
        wpe = register_module("wpe", std::make_shared<nn::Embedding>(T, d));  // (T, d) learned positions
        ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(d));
        attn = register_module("attn", std::make_shared<nn::CausalSelfAttention>(
                                           d, H, nn::CausalSelfAttentionOptions().bias(false)));
        ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(d));
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(d, 4 * d));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(4 * d, d));
        ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(d));
        head = register_module("head", std::make_shared<nn::Linear>(d, V, /*bias=*/false));
        nn::tie_weights(*head, *wte);  // head.weight IS wte.weight: one (V, d) parameter, stepped once
    }
    Tensor forward(const IndexTensor& ids) const {  // ids (B, T) → logits (B, T, V)
        Tensor x = add(wte->forward(ids), wpe->forward(IndexTensor::arange(T)));  // (B, T, d) + (T, d)
        x = add(x, attn->forward(ln_1->forward(x)));
        x = add(x, fc2->forward(F::gelu(fc1->forward(ln_2->forward(x)))));
        return head->forward(ln_f->forward(x));
    }
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::LayerNorm> ln_1, ln_2, ln_f;
    std::shared_ptr<nn::CausalSelfAttention> attn;
    std::shared_ptr<nn::Linear> fc1, fc2, head;
};

// The two mask conventions, one per function, give the same attention:
//   attn_mask (scaled_dot_product_attention) KEEPS where 1:  F::causal_mask(T, T) = tril(ones)
//   masked_fill FILLS where 1 (here with -inf, before softmax):  triu(ones({T, T}), 1), the future
bool mask_conventions_agree() {
    const std::int64_t hd = d / H;
    Tensor q = randn({1, H, T, hd}), k = randn({1, H, T, hd}), v = randn({1, H, T, hd});
    const Tensor keep = F::causal_mask(T, T), future = triu(ones({T, T}), 1);
    const Tensor kept = F::scaled_dot_product_attention(q, k, v, /*attn_mask=*/keep);
    Tensor scores = mul(matmul(q, transpose(k, -2, -1)), real(1 / std::sqrt(double(hd))));  // (1, H, T, T)
    Tensor weights = softmax(masked_fill(scores, future, -INFINITY), -1);
    const Tensor filled = matmul(weights, v);                                               // (1, H, T, hd)
    // One mask is the other's complement: keep = (future == 0).
    return equal(keep, eq(future, zeros({T, T}))) && allclose(kept, filled, 1e-5, 1e-6);
}

int main() {
    // Threads: set_num_threads(n) gives xgrad's pool n threads and keeps OpenBLAS on one (xgrad
    // cuts large products into bands itself). Without the call xgrad runs on one thread, and so
    // does OpenBLAS from the first product on. Use no more threads than cores.
    set_num_threads(1);
    manual_seed(0);
    std::mt19937_64 rng(0);  // the batch sampler

    // The vocabulary: the text's distinct characters, id = rank in sorted order.
    std::string chars = kText;
    std::sort(chars.begin(), chars.end());
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    const std::int64_t V = std::int64_t(chars.size());
    const double ln_V = std::log(double(V));
    fmt::print("own_project: real is {}, V {} characters, ln V = {:.4f} nats (a uniform guess)\n",
               sizeof(real) == 8 ? "double" : "float", V, ln_V);
    const bool masks_ok = mask_conventions_agree();
    fmt::print("attn_mask causal_mask(T, T) and masked_fill triu(ones, 1) agree: {}\n", masks_ok);

    // A batch: B windows of T + 1 characters at random offsets; y is x shifted by one.
    auto batch = [&] {
        std::vector<std::int64_t> x, y;  // row-major (B, T)
        for (std::int64_t b = 0; b < B; ++b) {
            const std::size_t at = rng() % (kText.size() - T);
            for (std::size_t t = 0; t < std::size_t(T); ++t) {
                x.push_back(std::int64_t(chars.find(kText[at + t])));
                y.push_back(std::int64_t(chars.find(kText[at + t + 1])));
            }
        }
        return std::pair{IndexTensor(x, {B, T}), IndexTensor(y, {B, T})};
    };

    // The tied head's initialisation. A default nn::Embedding draws N(0, 1), right for a lookup;
    // as the head it gives logits of size about √d, so the first loss sits far above ln V. GPT-2
    // and nanoGPT draw every embedding table from N(0, 0.02) (wpe too, or the positions drown the
    // tokens in x): nn::init::normal_ writes in place, before any forward, recording no graph.
    TinyGPT model(V);
    auto [x0, y0] = batch();
    auto first_loss = [&] { NoGradGuard no_grad; return F::cross_entropy(model.forward(x0), y0).item(); };
    fmt::print("first loss with the tables from N(0, 1): {:.2f} nats\n", first_loss());
    for (Tensor* w : {&model.wte->weight, &model.wpe->weight}) nn::init::normal_(*w, 0.0, 0.02);
    const double initial = first_loss();
    fmt::print("first loss with the tables from N(0, 0.02): {:.2f} nats\n", initial);

    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-2));
    double first = 0, last = 0;
    for (int step = 1; step <= 200; ++step) {
        auto [x, y] = batch();                          // (B, T), (B, T) int64
        Tensor logits = model.forward(x);               // (B, T, V)
        Tensor loss = F::cross_entropy(logits, y);      // () nats, the mean over B·T positions
        // Reading between forward and backward is free: data() is const; only mutable_data()
        // counts as a write (and then backward throws, since cross_entropy saved logits).
        const Array& z = logits.data();  // (B, T, V)
        int right = 0;
        for (std::int64_t r = 0; r < B * T; ++r) {
            const real* row = z.data() + r * V;
            right += std::max_element(row, row + V) - row == y[r];
        }
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (step == 1) first = loss.item();
        last = loss.item();
        if (step == 1 || step % 25 == 0)
            fmt::print("step {:>3}  loss {:.4f} nats  next character right {:>3}/{}\n", step, last, right, B * T);
    }
    const bool ok = masks_ok && std::abs(initial - ln_V) < 0.1 && last < first;
    fmt::print("{}\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
