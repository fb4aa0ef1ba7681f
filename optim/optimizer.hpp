// optim/optimizer.hpp — what every optimizer shares: parameter groups, zero_grad(), the
// per-parameter state, state_dict()/load_state_dict(), and the memory report. The algorithms
// live beside their formulas in optim/sgd.cpp and optim/adam.cpp. Used as in LibTorch:
//     optim::Adam opt(model.named_parameters(), optim::AdamOptions(3e-3));
//     opt.zero_grad();  loss.backward();  opt.step();
// State is lazy, as in PyTorch: a parameter gets its buffers at its first step with a gradient.
// Legend: V rows of an embedding table, d its width, k rows present in a row-sparse gradient,
//         t the step count of one parameter tensor, n the elements of a parameter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad::optim {

using Metadata = std::map<std::string, std::string>;

// ---- parameter groups -------------------------------------------------------------------------
// Parameters sharing a learning rate and a weight decay, as PyTorch's param_groups. A field left
// empty is taken from the optimizer's options: ParamGroup{model.named_parameters()}, or
// ParamGroup{head.named_parameters(), 1e-2, 0.0}. In an optimizer's param_groups() both are
// always set (read them as *group.lr); a scheduler sets `lr` between steps. A NaN, an infinity
// or a negative value is refused (ValueError) by the constructor, add_param_group and step().
struct ParamGroup {
    NamedTensors params;
    std::optional<double> lr = std::nullopt;            // learning rate γ
    std::optional<double> weight_decay = std::nullopt;  // λ
};

// The tensors of model.parameters(), named as model.named_parameters() names them (the dotted
// name registration gave, from the outermost module), or "param.<i>" (i its index) for a tensor no
// module registered and for a name already taken. The std::vector<Tensor> constructors use it.
NamedTensors named_by_module(const std::vector<Tensor>& params);

// ---- state dict -------------------------------------------------------------------------------
// Everything needed to resume training bit for bit, as a safetensors file's tensors and
// metadata (nn::save_safetensors writes it). Tensors, for stepped parameters only, each of the
// parameter's shape: "<param>.exp_avg", ".exp_avg_sq", ".max_exp_avg_sq" (Adam, AdamW),
// "<param>.momentum_buffer" (SGD). Metadata: "optimizer", the options ("beta1", ...),
// "param_groups", "group.<g>.lr", "group.<g>.weight_decay", "<param>.group", and "<param>.step"
// (t, 1 <= t <= 2^53; Adam, AdamW). Doubles are written in their shortest exact form.
struct OptimizerState {
    NamedTensors tensors;
    Metadata metadata;
};

// ---- memory report ------------------------------------------------------------------------------
// How the last step() changed a parameter.
enum class LastUpdate { none, dense, sparse };

// One parameter tensor. Sizes in bytes, exact: each array's elements · sizeof(real), and 8
// per step counter; object headers (shape, strides) are not counted, as in PyTorch.
struct MemoryRow {
    std::string name;
    Shape shape;
    bool trainable = true;                  // requires_grad; a frozen tensor (false, e.g. a LoRA base
                                            // weight) gets no gradient from backward, hence no state
    std::size_t numel = 0;
    std::size_t rows = 0;                   // shape[0]; 1 for a 0-d tensor
    std::size_t param_bytes = 0;            // numel · sizeof(real)
    std::size_t grad_bytes = 0;             // dense: numel · sizeof(real); sparse: SparseGrad::nbytes()
                                            // = k · (8 + d · sizeof(real)); no gradient: 0
    std::size_t exp_avg_bytes = 0;          // m
    std::size_t exp_avg_sq_bytes = 0;       // v
    std::size_t max_exp_avg_sq_bytes = 0;   // max over steps of v (amsgrad)
    std::size_t momentum_buffer_bytes = 0;  // b (SGD with momentum)
    std::size_t step_bytes = 0;             // t: 8 once allocated (Adam, AdamW); SGD keeps none
    LastUpdate last_update = LastUpdate::none;
    std::size_t rows_touched = 0;           // rows the last step() changed: k (sparse), rows (dense)
    // Sharded across ranks (distributed/zero.hpp) only:
    int owner = -1;                         // the rank that steps this parameter and keeps its state
    std::size_t state_bytes_all_ranks = 0;  // state_bytes() summed over the ranks

    std::size_t state_bytes() const;        // the sum of the five state columns
    double state_bytes_per_element() const; // state_bytes / numel (0 when numel is 0)
};

struct MemoryReport {
    std::string optimizer;                   // "Adam", ...
    std::vector<std::string> state_columns;  // the state this optimizer keeps, e.g. exp_avg, step
    std::vector<MemoryRow> rows;             // one per parameter, in param_groups() order
    // Set by distributed::ZeroRedundancyOptimizer: the rows are this rank's, with owner and
    // state_bytes_all_ranks filled, and the table shows both columns.
    bool sharded = false;
    int rank = 0, world_size = 1;
    std::string sharding;                    // "ZeRO stage 2", printed in the title
    // Bytes of the adapter file saved beside a frozen base (nn/lora_file.hpp), set by the caller
    // after saving it; printed in the summary when non-zero.
    std::size_t adapter_file_bytes = 0;

    MemoryRow total() const;                 // column sums (name "total"; no shape)
    MemoryRow total_trainable() const;       // the sums over the trainable rows ("total trainable")
    MemoryRow total_frozen() const;          // ... and over the frozen rows ("total frozen")
    bool has_frozen() const;                 // any row with trainable false
};

// An aligned table of exact bytes per column, then a summary line in B/KiB/MiB/GiB. A report with
// a frozen row also shows a "trainable" column (yes/no), the totals of the trainable and of the
// frozen rows, and a summary line for each; the frozen parameters appear only if they were given
// to the optimizer (a LoRA model's named_parameters() holds both). Then the adapter file's bytes.
std::ostream& operator<<(std::ostream& os, const MemoryReport& report);
// The same table with only the `largest` rows of most bytes (parameter + gradient + state), largest
// first, and one line summing the rows left out; the total and the summary line still count every row.
std::string memory_summary(const MemoryReport& report, std::size_t largest = 5);
// "812 B", "1.50 KiB", "3.00 MiB" (powers of 1024).
std::string human_bytes(std::size_t bytes);

// ---- per-parameter state ---------------------------------------------------------------------------
// What an algorithm keeps for one parameter between steps: buffers are empty (0 elements)
// until its first step, then of the parameter's shape.
struct ParamState {
    bool initialized = false;                // set after the first step that saw a gradient
    std::int64_t step = 0;                   // t (Adam, AdamW)
    Array exp_avg = Array(ArrayShape{0});         // m
    Array exp_avg_sq = Array(ArrayShape{0});      // v
    Array max_exp_avg_sq = Array(ArrayShape{0});  // v_max (amsgrad)
    Array momentum_buffer = Array(ArrayShape{0}); // b
    // Bookkeeping for memory_report() only: not algorithm state, not saved, not counted.
    LastUpdate last_update = LastUpdate::none;
    std::size_t rows_touched = 0;

    // By state-dict name ("exp_avg", ...); null if unknown.
    Array* buffer(const std::string& name);
    const Array* buffer(const std::string& name) const;
};

// ---- the base class -------------------------------------------------------------------------------
class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;  // two optimizers would share parameters but not state
    Optimizer& operator=(const Optimizer&) = delete;

    // One update of every parameter with a gradient (dense or row-sparse), written into its
    // .data() array (never recorded: parameters stay leaves). Throws ValueError before changing
    // anything for a malformed gradient, or a sparse one with SGD momentum or amsgrad.
    void step();
    // The same for the parameters `only` accepts; the others keep their values and state, and
    // their gradients are neither checked nor read. For an optimizer whose state is sharded
    // across ranks (distributed/zero.hpp: each rank steps the parameters it owns).
    void step(const std::function<bool(const Tensor& param)>& only);
    // The checks step(only) makes before it changes anything, alone: throws the same ValueError, or
    // returns having changed nothing. For ranks that must all know they can step before any does
    // (distributed/zero.hpp).
    void check_step(const std::function<bool(const Tensor& param)>& only = nullptr) const;

    // set_to_none (the default, as in PyTorch ≥ 2.0): drop every gradient. Otherwise dense
    // gradients are zeroed in place and sparse ones emptied (k = 0), by core/accumulate.cpp.
    void zero_grad(bool set_to_none = true);

    std::vector<ParamGroup>& param_groups() { return groups_; }
    const std::vector<ParamGroup>& param_groups() const { return groups_; }
    // Appends a group (NaN fields from the options). Throws ValueError on a bad lr or
    // weight_decay, a parameter name already present, or the same tensor twice.
    void add_param_group(ParamGroup group);

    // A deep copy of the state (see OptimizerState for the names): it holds as many bytes again
    // as the buffers (AdamW: 2 · 4 B a parameter). A later step() leaves it as it was.
    OptimizerState state_dict() const;
    // state_dict()'s tensors, same names and order, as pointers to the live buffers: no copy. They
    // change with the next step() and load_state_dict(), and are valid while the optimizer lives.
    // What train::save streams to a file from a TrainingState made from the optimizer itself.
    std::vector<std::pair<std::string, const Array*>> state_buffers() const;
    // state_dict()'s metadata alone, no buffer copied.
    Metadata state_metadata() const;
    // Parameter `name`'s state as it is (read only), or null before its first step.
    const ParamState* state_of(const std::string& name) const;
    // Restores step counts, buffers and every group's lr and weight_decay; the options must
    // equal this optimizer's. Throws ValueError naming the first difference (kind, option,
    // groups, a missing or unexpected tensor or key, a shape, a step outside [1, 2^53], a number
    // not strictly parsed by core/parse.hpp, a buffer value that is not finite, a negative
    // exp_avg_sq or max_exp_avg_sq) and leaves the optimizer as it was.
    void load_state_dict(const OptimizerState& state);

    // Bytes of each parameter, its gradient and its optimizer state, as they are now.
    MemoryReport memory_report() const;

    const std::string& name() const { return kind_; }  // "SGD", "Adam", "AdamW"
    // The buffers one parameter's state holds after its first step, by state-dict name
    // ("exp_avg", "exp_avg_sq"; none for SGD without momentum).
    virtual std::vector<std::string> state_buffer_names() const = 0;
    // Whether the state holds a step count t per parameter (Adam, AdamW).
    virtual bool counts_steps() const = 0;

protected:
    // `kind` names the algorithm in messages and state dicts. Throws ValueError for an empty
    // list, an undefined or non-leaf parameter, duplicates, or a negative lr or weight_decay.
    Optimizer(std::string kind, std::vector<ParamGroup> groups, double default_lr,
              double default_weight_decay);

    // The algorithm. `grad` has the parameter's shape (dense) or is row-sparse (lazy update of
    // its k rows). `state.initialized` is false at the parameter's first step.
    virtual void update_dense(const ParamGroup& group, Array& param, const Array& grad,
                              ParamState& state) = 0;
    virtual void update_sparse(const ParamGroup& group, Array& param, const SparseGrad& grad,
                               ParamState& state) = 0;
    // Throws ValueError if `param_name`'s row-sparse gradient cannot be used.
    virtual void check_sparse_supported(const std::string& param_name) const = 0;
    // The options as decimal strings ("beta1" → "0.9"), for state_dict and its check on load.
    virtual Metadata options_metadata() const = 0;

private:
    void check_group(const ParamGroup& group, std::size_t index) const;

    std::string kind_;
    double default_lr_;
    double default_weight_decay_;
    std::vector<ParamGroup> groups_;
    std::map<std::string, ParamState> state_;  // by parameter name (names are unique)
};

}  // namespace xgrad::optim
