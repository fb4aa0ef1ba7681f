// examples/gpt/model.hpp — a GPT in nanoGPT's shape: token table, positions, L pre-LayerNorm
// blocks of causal self-attention and an MLP, a final LayerNorm, and a head tied to the table.
//
// Legend: B batch, T time (≤ block), V vocabulary, d width, H heads, hd = d/H, L blocks.
//
//   idx (B, T) int64
//   x = wte[idx] + wpe[0..T)                  (B, T, d)   token vectors plus position vectors (--pos)
//   for each of the L blocks (pre-LayerNorm residual blocks, GPT-2):
//       x = x + attn(ln_1(x))                 (B, T, d)   tokens look at earlier tokens
//       x = x + mlp(ln_2(x))                  (B, T, d)   each token thinks alone: d → 4d → GELU → d
//   logits = ln_f(x) · wteᵀ                   (B, T, V)   the head reuses the token table (tied)
//
// Names are nanoGPT's (transformer.wte.weight, ...), Linear weights (out, in). examples/gpt/README.md
// explains the model ("What it does"), --pos ("Positions"), the KV cache and LLaMA's block.
// ref: Radford et al. 2019 (GPT-2); Karpathy, nanoGPT model.py.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <xgrad/core/checkpoint.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/generate.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>

namespace gpt {

using namespace xgrad;

struct GPTConfig {
    std::int64_t vocab = 0;        // V
    std::int64_t block = 64;       // T max, characters of context
    std::int64_t n_layer = 4;      // L
    std::int64_t n_head = 4;       // H
    std::int64_t d = 128;          // width
    std::string pos = "learned";   // learned | sinusoidal | rope | none
    bool tie = true;               // head weight = wte.weight
    bool bias = true;              // biases in every Linear and LayerNorm (not the head)
    double dropout = 0.0;          // after the embeddings, in attention, after each residual branch
    bool fused_attention = true;   // CausalSelfAttentionOptions::fast_kernels: fused or tiled where exact
    std::string arch = "gpt2";     // gpt2 (this file) | llama (llama.hpp)
    std::int64_t n_kv_head = 0;    // K/V heads, dividing n_head (grouped-query attention); 0 = n_head
    std::int64_t ffn_hidden = 0;   // llama: SwiGLU's hidden width; 0 = nn::swiglu_hidden_width(d)
    bool checkpoint_blocks = false;  // each block through xgrad::checkpoint: same values, less graph memory
    bool sparse_embedding = false;   // the token table's gradient row-sparse (k rows), AdamW's update lazy; untied only
};

// The one check of a configuration, for GPT, Llama and the command line: positive sizes (vocab,
// block, n_layer, n_head, d), arch gpt2 or llama, n_head dividing d, n_kv_head dividing n_head, pos
// one of four (llama: rope, and no biases), an even head width for rope and an even d for
// sinusoidal, ffn_hidden ≥ 0 and for llama only, dropout in [0, 1), a sparse token table only
// untied. Throws ValueError naming `op` and each field as `name` spells it: config_field gives
// the struct's own names ("n_head"; "untied" as "tie false"), the command line gives its flags.
std::string config_field(const std::string& field);
void check_config(const GPTConfig& c, const char* op,
                  const std::function<std::string(const std::string&)>& name = config_field);

// What training, generation and the reports need of a model, GPT-2's or LLaMA's block. As an
// nn::CausalLM, nn::generate samples from it (nn/generate.hpp).
class LanguageModel : public nn::CausalLM {
public:
    // idx (B, T) int64 with T ≤ block and ids in [0, V) → logits (B, T, V).
    // Throws ValueError for T > block, IndexError for an id outside [0, V).
    Tensor forward(const IndexTensor& idx) const override = 0;

    // Generation: idx (B, t) holds positions P .. P + t − 1 after the P = caches[0].length() already
    // cached (caches: one per layer, from make_kv_caches). Appends their keys and values and
    // returns their logits (B, t, V), equal to the last t rows of forward() on all P + t tokens.
    // No graph. Throws ValueError for P + t > block or caches of another model, IndexError for ids.
    Tensor forward_cached(const IndexTensor& idx, std::vector<nn::KVCache>& caches) const override = 0;

    // The attention weights of one layer (B, H, T, T) for idx, without building a graph.
    virtual Tensor attention_weights(const IndexTensor& idx, std::int64_t layer) const = 0;

    // The token table (V, d): wte, or LLaMA's tok_embeddings.
    virtual const nn::Embedding& token_embedding() const = 0;

    // One empty KVCache per layer, each holding up to block positions.
    std::vector<nn::KVCache> make_kv_caches() const override;
    std::int64_t block_size() const override { return config_.block; }
    // Bytes a cache of every layer holds per position of one sequence: 2 (k, v) · L · Hkv · hd · sizeof(real).
    std::size_t kv_cache_bytes_per_token() const;

    const GPTConfig& config() const { return config_; }

protected:
    explicit LanguageModel(const GPTConfig& config);
    // Checks idx (B, T) and that P + T ≤ block; op names the model.
    void check_window(const IndexTensor& idx, std::int64_t P, const char* op) const;
    // Checks that `caches` are one per layer and that idx fits after them; returns P, their length.
    std::int64_t cached_positions(const IndexTensor& idx, const std::vector<nn::KVCache>& caches,
                                  const char* op) const;
    // GPT-2's initialisation (nanoGPT _init_weights), from the global generator: N(0, 0.02) for
    // every weight, 0 for biases, and N(0, 0.02/√(2L)) for the weights whose names end in one of
    // `residual`, the projections that write into the residual stream in each block, so that the
    // stream's variance does not grow with depth. Parameters whose names contain `norm` (the
    // normalization layers) keep their (1, 0).
    void init_gpt2(const std::string& norm, const std::vector<std::string>& residual);
    // x (B, T, d) through block i, (B, T, d), in a profiler region "block i" (free when no profiler
    // runs). With config().checkpoint_blocks, through xgrad::checkpoint (core/checkpoint.hpp): the
    // graph keeps the block's input and output, not its insides, and backward runs the block again
    // (same dropout masks) to get its gradients.
    template <class BlockT>
    Tensor run_block(std::size_t i, const std::shared_ptr<BlockT>& block, const Tensor& x) const {
        const profiler::RecordFunction scope(block_names_[i]);
        if (!config_.checkpoint_blocks) return block->forward(x);
        return checkpoint([block](const Tensor& in) { return block->forward(in); }, x);
    }
    GPTConfig config_;

private:
    std::vector<std::string> block_names_;  // "block 0", "block 1", ...: the profiler's regions
};

// The feed-forward half of a block: d → 4d → GELU (exact erf form) → d.
class MLP : public nn::Module {
public:
    MLP(const GPTConfig& c);
    Tensor forward(const Tensor& x) const;  // (B, T, d) → (B, T, d)

    std::shared_ptr<nn::Linear> c_fc, c_proj;

private:
    double dropout_;
};

// One pre-LayerNorm block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
class Block : public nn::Module {
public:
    Block(const GPTConfig& c);
    Tensor forward(Tensor x) const;  // (B, T, d) → (B, T, d)
    // The same for the new positions x (B, t, d), attention reading and extending `cache`.
    Tensor forward_cached(Tensor x, nn::KVCache& cache) const;

    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<nn::CausalSelfAttention> attn;
    std::shared_ptr<MLP> mlp;
};

// The trunk, registered as "transformer": wte, wpe (learned positions only), h.<i>, ln_f.
class Transformer : public nn::Module {
public:
    Transformer(const GPTConfig& c);

    std::shared_ptr<nn::Embedding> wte;         // (V, d) token table
    std::shared_ptr<nn::LearnedPositions> wpe;  // (block, d); null unless pos = learned
    std::shared_ptr<nn::ModuleList<Block>> h;   // the L blocks, named "0", "1", ...
    std::shared_ptr<nn::LayerNorm> ln_f;
};

class GPT : public LanguageModel {
public:
    // Builds and initialises the model from the global generator (manual_seed): weights
    // N(0, 0.02), biases 0, LayerNorm weight 1, and the residual output projections
    // (attn.c_proj, mlp.c_proj) N(0, 0.02/√(2L)), as GPT-2 and nanoGPT. Throws ValueError for
    // a non-positive size, d not divisible by H, an odd head width with rope, an unknown pos, or
    // sparse_embedding with a tied head (the head would give the table a dense gradient anyway).
    explicit GPT(const GPTConfig& config);

    Tensor forward(const IndexTensor& idx) const override;
    Tensor forward_cached(const IndexTensor& idx, std::vector<nn::KVCache>& caches) const override;
    Tensor attention_weights(const IndexTensor& idx, std::int64_t layer) const override;
    const nn::Embedding& token_embedding() const override { return *transformer->wte; }

    std::shared_ptr<Transformer> transformer;
    std::shared_ptr<nn::Linear> lm_head;  // (V, d), no bias; its weight IS wte.weight when tied

private:
    // (B, T) → (B, T, d): tokens + the positions P .. P + T − 1
    Tensor embed(const IndexTensor& idx, std::int64_t P) const;
    Tensor sinusoidal_;  // (block, d) with pos = sinusoidal: the fixed table, not a parameter
};

// Puts a model in evaluation mode (dropout off) for the guard's lifetime, then back in the mode it
// was in: nanoGPT's model.eval() ... model.train() around estimate_loss and generation.
class EvalMode {
public:
    explicit EvalMode(nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
    ~EvalMode() { m_.train(was_training_); }
    EvalMode(const EvalMode&) = delete;
    EvalMode& operator=(const EvalMode&) = delete;

private:
    nn::Module& m_;
    bool was_training_;
};

// The model that config.arch names: GPT (gpt2) or Llama (llama.hpp). Throws ValueError for
// another arch, and what the model's constructor throws.
std::unique_ptr<LanguageModel> make_model(const GPTConfig& config);

// ---- training -------------------------------------------------------------------------------------
// AdamW with nanoGPT's two parameter groups: group 0 every parameter with 2 or more dims (the
// embedding tables and Linear weights) with weight decay λ, group 1 the rest (biases,
// LayerNorm weights) with none. The tied table is one parameter, in group 0. Frozen parameters
// (requires_grad off: a LoRA run's base) are left out, so that AdamW keeps no state for them.
std::unique_ptr<optim::AdamW> make_adamw(const LanguageModel& model, double lr, double beta1, double beta2,
                                         double weight_decay, double eps = 1e-8);

struct StepResult {
    double loss;       // the batch's mean cross-entropy before the update, nats
    double grad_norm;  // ‖∇‖₂ over all parameters before clipping
};
// ‖∇‖₂ over all of the model's parameters, and every gradient scaled by max_norm / ‖∇‖₂ when the
// norm is above max_norm (optim::clip_grad_norm_); max_norm ≤ 0 only measures.
double clip_gradients(LanguageModel& model, double max_norm);

// One training step on one process, as examples/gpt takes it with one rank and --grad-accum 1
// (and as tests/reference/make_gpt_reference.py does in PyTorch):
//     zero_grad; loss = CE(model(x), y); backward; clip_grad_norm_(max_norm); opt.step()
// x, y (B, T) int64. max_norm ≤ 0 skips clipping. The learning rate is whatever the groups hold.
StepResult train_step(LanguageModel& model, optim::Optimizer& opt, const IndexTensor& x, const IndexTensor& y,
                      double max_norm);

}  // namespace gpt
