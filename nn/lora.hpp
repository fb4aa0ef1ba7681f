// nn/lora.hpp — LoRA: a trained layer kept frozen, and a small low-rank update trained beside it.
//
//   W' = W + s·B·A          W (out, in) frozen,  A (r, in),  B (out, r),  r ≪ min(in, out)
//   y  = x W'ᵀ + b  =  x Wᵀ + b  +  s·(dropout(x) Aᵀ) Bᵀ          s = α/r   (rsLoRA: α/√r)
//
// A starts as Linear's own weight does (U(±1/√in), PEFT's kaiming_uniform with a = √5) and B at
// zero, so the adapted layer starts equal to the base. The update trains r·(in + out) numbers
// instead of out·in; the frozen W gets no gradient and no optimizer state.
// ref: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"; Hugging Face PEFT
// (LoraConfig: r, lora_alpha, lora_dropout, use_rslora; the names lora_A, lora_B)
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// An adapter's settings, PEFT's LoraConfig fields and defaults; setters chain:
//   nn::LoRAOptions().rank(4).alpha(8).dropout(0.05)
class LoRAOptions {
public:
    LoRAOptions& rank(std::int64_t v) { rank_ = v; return *this; }    // r (8)
    LoRAOptions& alpha(double v) { alpha_ = v; return *this; }        // α, lora_alpha (8)
    LoRAOptions& dropout(double v) { dropout_ = v; return *this; }    // on the adapter's input (0)
    LoRAOptions& use_rslora(bool v) { rslora_ = v; return *this; }    // s = α/√r instead of α/r (false)
    // The host's output rows split into parts of `sizes` (Σ = out_features), only those marked in
    // `adapted` getting an update: the fused q|k|v projection d → d + 2e of grouped-query attention,
    // adapted at q and v, is .parts({d, e, e}, {true, false, true}). Empty (the default): one part,
    // the whole output. Checked by add_lora. ref: loralib, MergedLinear(enable_lora=[...])
    LoRAOptions& parts(std::vector<std::int64_t> sizes, std::vector<bool> adapted) {
        part_sizes_ = std::move(sizes);
        part_adapted_ = std::move(adapted);
        return *this;
    }

    std::int64_t rank() const { return rank_; }
    double alpha() const { return alpha_; }
    double dropout() const { return dropout_; }
    bool use_rslora() const { return rslora_; }
    const std::vector<std::int64_t>& part_sizes() const { return part_sizes_; }
    const std::vector<bool>& part_adapted() const { return part_adapted_; }
    // s: α/r, or α/√r with use_rslora (Kalajdzievski 2023, "A Rank Stabilization Scaling Factor").
    double scaling() const;

private:
    std::int64_t rank_ = 8;
    double alpha_ = 8;
    double dropout_ = 0;
    bool rslora_ = false;
    std::vector<std::int64_t> part_sizes_;
    std::vector<bool> part_adapted_;
};

// What every adapter shares: its options, merge() and unmerge() of its own update ΔW into the
// host's weight, and the switch that runs the base alone.
class LoRAAdapter {
public:
    virtual ~LoRAAdapter() = default;

    // W += s·ΔW: the host then computes the adapted layer in one product or lookup, for inference:
    // merged, a forward in training mode with gradients on throws ValueError (A and B would get no
    // gradient; unmerge() to train). Throws ValueError if already merged, or disabled (its update is
    // not part of what the layer computes).
    void merge();
    // W -= s·ΔW, W back to the base to rounding. Throws ValueError if not merged.
    void unmerge();
    bool merged() const { return merged_; }

    // enabled(false): the host computes the base layer alone, bit for bit. Throws ValueError
    // while merged (unmerge first: the merged W is no longer the base).
    void enabled(bool on);
    bool enabled() const { return enabled_; }

    const LoRAOptions& options() const { return options_; }
    // The adapter's trainable tensors: A's and B's weights.
    virtual std::vector<Tensor> parameters() const = 0;
    // The host's W (or E), a shared handle; and W + s·ΔW, a new array (W unchanged; W itself once
    // merged). merged_weight throws ValueError where merge() would.
    const Tensor& host_weight() const { return weight_; }
    Array merged_weight() const;

    // The host's state_dict() and load_state_dict() hook (nn/module.hpp): refuses (ValueError) while
    // merged, since a state dict keeps W and the adapter apart and has no mark of a merge ("unmerge()
    // first"), and a state dict to load without this adapter's tensors (a base checkpoint: load it
    // before nn::apply_lora).
    void check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const;

protected:
    LoRAAdapter(const LoRAOptions& options, Tensor weight) : options_(options), weight_(std::move(weight)) {}
    // True if the host adds the adapter's term: enabled and not merged. Throws ValueError when merged
    // in training mode with gradients on (`training`: the adapter's mode): the merged W is frozen, so
    // A and B would silently get no gradient.
    bool active(bool training) const;
    // W += s·ΔW for the host's W (out, in) or E (V, d) at `W`, row-major.
    virtual void add_update(double s, real* W) const = 0;

    LoRAOptions options_;
    Tensor weight_;  // the host's W or E (a shared handle)

private:
    bool merged_ = false;
    bool enabled_ = true;
};

// The adapter of one Linear (nn::add_lora makes it): ΔW = B·A. A and B are Linear modules without
// bias, registered on the host layer as its children lora_A and lora_B, so that their parameters
// are named "<layer>.lora_A.weight" (r, in) and "<layer>.lora_B.weight" (out, r), as PEFT names them.
//
// With parts (LoRAOptions::parts), each of the k adapted parts j, of n_j output rows, has its own
// A_j (r, in) and B_j (n_j, r), stacked in part order as loralib's MergedLinear stacks them, under
// the same two names: lora_A.weight (k·r, in) = [A_0; A_1; ...], lora_B.weight (Σ n_j, r) =
// [B_0; B_1; ...]. The update is block-diagonal: part j's rows of y get s·(x A_jᵀ) B_jᵀ, the other
// parts' rows are the base's, bit for bit. For q|k|v adapted at (q, v): ΔW = [B_0 A_0; 0; B_1 A_1].
class LoRA : public LoRAAdapter {
public:
    LoRA(Linear& host, const LoRAOptions& options);

    // The host's forward, x Wᵀ + b + s·B(A(dropout(x))); x Wᵀ + b alone when disabled or merged (the
    // merged W already holds s·B·A). x (..., in) → (..., out). The choice of form is made here:
    // functional::lora_linear, one op, without parts and without dropout in training; the composed
    // apply(x, functional::linear(x, W, b)) otherwise. Both give the same values and gradients.
    Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias) const;
    // The composed form: y + s·B(A(dropout(x))) for the host's output y = x Wᵀ + b, in ops of their
    // own (a sum, a scale, two Linear products); y alone when disabled or merged. x (..., in), y (..., out).
    Tensor apply(const Tensor& x, const Tensor& y) const;
    std::vector<Tensor> parameters() const override { return {A->weight, B->weight}; }

    std::shared_ptr<Linear> A;  // (r, in): lora_A; with parts (k·r, in)
    std::shared_ptr<Linear> B;  // (out, r): lora_B; with parts (Σ n_j, r)

private:
    // One adapted part: its rows of the host's output and of W, and where its A_j and B_j start.
    struct Block {
        std::int64_t row, rows;  // W's rows [row, row + rows): the part's output features
        std::int64_t a_row;      // A_j = A's rows [a_row, a_row + r)
        std::int64_t b_row;      // B_j = B's rows [b_row, b_row + rows)
    };
    void add_update(double s, real* W) const override;  // W's rows of each block += s·B_j·A_j

    std::int64_t out_;
    std::vector<Block> blocks_;  // one block covering every row without parts
};

namespace functional {
// A Linear with its LoRA term as one op: y = x Wᵀ + b + s·(x Aᵀ) Bᵀ, each sum and the scale s folded
// into the gemms (nn/lora_linear.cpp); the same values and gradients as the composed
// x Wᵀ + b + s·B(A(x)). x (..., in), weight (out, in), bias (out) or undefined, A (r, in), B (out, r);
// y (..., out). Throws ValueError on sizes that do not fit. ref: Hu et al. 2021, LoRA, eq. (3)
Tensor lora_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& A, const Tensor& B,
                   real s);
}  // namespace functional

// The adapter of one Embedding (nn::add_lora makes it), PEFT's LoRA of nn.Embedding:
//   y = E[ids] + s·(Aᵀ[ids]) Bᵀ      E (V, d) frozen,  A (r, V) zeros,  B (d, r) ~ N(0, 1),  ΔE = (B·A)ᵀ
// Aᵀ (V, r) is itself a table looked up by ID: an Embedding(V, r), child lora_embedding_A, with the
// host's padding_idx and sparse options, so that only the rows looked up get gradient (row-sparse
// with sparse(true), and Adam's lazy update). Its parameter "<layer>.lora_embedding_A.weight" is
// (V, r), the transpose of PEFT's lora_embedding_A (r, V) (the adapter file writes PEFT's layout);
// B is a Linear(r, d) without bias, "<layer>.lora_embedding_B.weight" (d, r). No dropout (ids are
// not features; PEFT applies none). merge() of a table tied to an output head (nn::tie_weights)
// throws ValueError: the head's W is the same tensor, so merging would move every logit too.
class LoRAEmbedding : public LoRAAdapter {
public:
    LoRAEmbedding(Embedding& host, const LoRAOptions& options);

    // y + s·B(Aᵀ[ids]) for the host's y = E[ids]; y alone when disabled or merged. ids (...), y (..., d).
    Tensor apply(const IndexTensor& ids, const Tensor& y) const;
    std::vector<Tensor> parameters() const override { return {A->weight, B->weight}; }

    std::shared_ptr<Embedding> A;  // Aᵀ (V, r): lora_embedding_A, zeros
    std::shared_ptr<Linear> B;     // (d, r): lora_embedding_B, N(0, 1)

private:
    void add_update(double s, real* E) const override;  // E (V, d) += s · Aᵀ (V, r) · Bᵀ (r, d)

    const Embedding* host_;
};

// Adds a LoRA adapter to `layer` and freezes its weight and bias (requires_grad off), so that
// its backward computes dX alone (nn/linear.cpp). Returns the adapter, which `layer` owns.
// Throws ValueError if `layer` has an adapter already or is tied to an Embedding's table
// (nn/tying.hpp), r is outside [1, min(in, out)] (with parts, [1, min(in, smallest adapted part)]),
// α is not finite and > 0 or gives a scaling s infinite or zero as a real, dropout is outside
// [0, 1), or the parts are not positive sizes summing to out with a flag each, one at least adapted.
LoRA& add_lora(Linear& layer, const LoRAOptions& options = {});

// Adds a LoRA adapter to `table` and freezes its weight, so that its lookup's backward scatters no
// rows into E. Returns the adapter, which `table` owns. Throws ValueError if `table` has an adapter
// already, r is outside [1, min(V, d)], the options have parts, or α as add_lora(Linear&) says.
LoRAEmbedding& add_lora(Embedding& table, const LoRAOptions& options = {});

// Adds an adapter to every Linear and Embedding of `model` whose dotted path matches one of
// `targets`, and freezes every parameter of the model but the adapters' (an earlier call's stay
// trainable, as PEFT keeps them). A target matches a path that equals it or ends in "." + target,
// and "*" stands for one whole component: "attn.c_attn" adapts every block's attn.c_attn, "mlp.*"
// every layer directly under an "mlp", "wte" the token table; a layer registered under several
// paths is adapted once, under its first. Returns the adapted paths in named_parameters() order.
// Throws ValueError, before anything is changed, for an empty target list, a model without Linear
// or Embedding, a target that matches no layer (naming it and the model's layer paths), or a
// matched layer add_lora refuses.
// ref: PEFT, get_peft_model with LoraConfig(target_modules=[...])
std::vector<std::string> apply_lora(Module& model, const std::vector<std::string>& targets,
                                    const LoRAOptions& options = {});

// Every adapter of `model` (of a Linear: a LoRA, of an Embedding: a LoRAEmbedding) with its host's
// dotted path, in named_parameters() order: `for (auto& [path, a] : adapted_layers(m)) a->merge();`
// A model that is itself an adapted Linear or Embedding gives its adapter at the path "".
// apply_lora, merged_state_dict and the adapter file walk the model the same way.
std::vector<std::pair<std::string, LoRAAdapter*>> adapted_layers(const Module& model);

// The weights the model computes with, under the base model's names: each enabled adapter's W + s·ΔW
// (a copy; the model is not changed), the adapters' own tensors left out, for a copy of the model
// without adapters (a merged checkpoint). Throws ValueError as state_dict() does for a merged
// adapter, and for a table tied to a head (merging it would move the head too).
NamedTensors merged_state_dict(const Module& model);

// The model's parameters split by requires_grad: scalars trained and scalars frozen.
struct ParameterCounts {
    std::size_t trainable = 0;
    std::size_t frozen = 0;
};
ParameterCounts count_parameters(const Module& model);

}  // namespace xgrad::nn
