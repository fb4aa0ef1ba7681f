// distributed/zero.hpp — ZeroRedundancyOptimizer: data parallelism in which each parameter tensor
// has one owner rank, which alone keeps its optimizer state and steps it (ZeRO stages 1 and 2).
//
// Legend: W ranks, Ψ the parameters' elements. Bytes per rank for fp32 AdamW (θ, g, m and v):
//     DDP 16Ψ;   stage 1: 4Ψ + 4Ψ + 8Ψ/W;   stage 2: 4Ψ + (4Ψ + 8Ψ)/W
// One step: reduce-scatter the gradients (each owner receives their mean), the owners' step, an
// all-gather of the parameters: the bytes of one all-reduce. The loop, every call visible:
//     zero.zero_grad();  loss.backward();  zero.reduce_scatter_gradients();
//     zero.clip_grad_norm_(1.0);  zero.step();
// distributed/README.md, "Sharding the optimizer", gives the argument, the byte counts, how owners
// are chosen, and why stage 2 lowers the bytes held between steps but not the peak of a step.
//
// ref: Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", arXiv:1910.02054, §5.1–5.2; PyTorch docs, torch.distributed.optim.ZeroRedundancyOptimizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <xgrad/distributed/distributed.hpp>
#include <xgrad/nn/module.hpp>
#include <xgrad/optim/optimizer.hpp>

namespace xgrad::distributed {

namespace detail {
class SyncedParameters;
}

// As DDPOptions: ZeroOptions().stage(2).bucket_bytes(1 << 20).
class ZeroOptions {
public:
    ZeroOptions& stage(int v) { stage_ = v; return *this; }
    ZeroOptions& bucket_bytes(std::size_t v) { bucket_bytes_ = v; return *this; }

    // 1: the optimizer state sharded; 2: the reduced gradients too.
    int stage() const { return stage_; }
    // Dense gradients per reduce-scatter (and parameters per all-gather), bytes; 25 MiB as DDP.
    std::size_t bucket_bytes() const { return bucket_bytes_; }

private:
    int stage_ = 1;
    std::size_t bucket_bytes_ = std::size_t(25) << 20;
};

// What the last reduce_scatter_gradients() and step() sent, counted per rank.
struct ZeroStats {
    std::size_t reduce_scatters = 0;  // reduce-scatter calls, one per bucket with a dense gradient
    std::size_t reduced_bytes = 0;    // bytes of dense gradient this rank contributed (all W segments)
    std::size_t all_gathers = 0;      // all-gather calls after the step
    std::size_t gathered_bytes = 0;   // bytes of parameters every rank holds after them (all W segments)
    std::size_t sparse_rows = 0;      // rows of row-sparse gradient this rank contributed
    std::size_t broadcast_rows = 0;   // rows of row-sparse tables sent by their owners after the step
    double seconds = 0;               // wall time of both calls, s
};

class ZeroRedundancyOptimizer {
public:
    // Shards `optimizer` (any xgrad optimizer: SGD, Adam, AdamW; already built over `module`'s
    // parameters, which must be exactly the module's trainable ones) across the ranks. Like
    // DistributedDataParallel it first checks that every rank holds the same model and options
    // and copies rank 0's parameters and buffers into every rank's. Collective: every rank builds
    // it together, before loading a checkpoint (load_state_dict needs the owners). Throws
    // ValueError on every rank naming the first difference between the ranks, for a stage other
    // than 1 or 2, bucket_bytes 0, or a parameter in one of the module and the optimizer only
    // (a frozen one in the optimizer too); step(), state_dict(), load_state_dict() and
    // memory_report() refuse alike a parameter added to the optimizer since.
    ZeroRedundancyOptimizer(nn::Module& module, optim::Optimizer& optimizer, ZeroOptions options = {});
    ~ZeroRedundancyOptimizer();
    ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
    ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

    // The optimizer's zero_grad: every gradient dropped (or zeroed in place); the next
    // reduce_scatter_gradients() starts a new step.
    void zero_grad(bool set_to_none = true);

    // After the last backward of the step: each rank's own parameters receive the mean over the
    // ranks of their gradients (one reduce-scatter per bucket; a row-sparse table the union of the
    // ranks' rows, as DDP). The other parameters' gradients are zeroed in place (stage 1) or freed
    // (stage 2): they were sent to their owners. A parameter no rank has a gradient for keeps none.
    // Once per step: a second call before step() or zero_grad() would divide the means by W again,
    // and is refused (ValueError, on every rank alike). Collective. Throws the same ValueError on
    // every rank, changing no gradient, for the causes DistributedDataParallel::sync_gradients names.
    void reduce_scatter_gradients();

    // clip_grad_norm_ (norm 2) of the whole model's mean gradient: each rank's Σ g² over its own
    // parameters, summed over the ranks, gives the figure one process would, bit for bit; each
    // rank scales its own gradients. Returns ‖G‖ before clipping. Collective; call between
    // reduce_scatter_gradients() and step() (optim::clip_grad_norm_ there would see this rank's
    // share only). Throws ValueError for a max_norm < 0 or NaN; when called before
    // reduce_scatter_gradients(); for a non-finite ‖G‖ when error_if_nonfinite.
    double clip_grad_norm_(double max_norm, bool error_if_nonfinite = false);

    // Each rank steps its own parameters with the optimizer, then every rank receives the others'
    // (one all-gather per bucket; the rows a row-sparse step changed, from their owner). Collective.
    // Throws ValueError on every rank when reduce_scatter_gradients() has not run since the last
    // step, and the optimizer's ValueError, the same on every rank (naming the rank), when a
    // rank's optimizer refuses its gradients: every rank checks its step (Optimizer::check_step)
    // and the ranks agree before any steps, so then no rank has changed anything.
    void step();

    // The whole optimizer state, gathered onto rank 0 in exactly the form one process's
    // optimizer.state_dict() takes (the same tensors and metadata), so a checkpoint saved at W
    // ranks loads at any other, sharded or not. Other ranks get an empty state. Collective.
    optim::OptimizerState state_dict() const;
    // Loads a whole state (a one-process state_dict, or state_dict() above): each rank keeps its
    // own parameters' part. Collective; refuses on every rank alike with the optimizer's
    // ValueError (raised on any rank, naming it) and leaves every rank's state as it was.
    void load_state_dict(const optim::OptimizerState& state);

    // The optimizer's memory report for this rank, with each parameter's owner and its state
    // bytes summed over the ranks (MemoryReport::sharded). Collective.
    optim::MemoryReport memory_report() const;

    // The rank that owns `param` (a parameter of the module); throws ValueError for another tensor.
    int owner(const Tensor& param) const;
    // This rank's parameters, in named_parameters() order.
    NamedTensors owned_parameters() const;
    int stage() const { return stage_; }
    optim::Optimizer& optimizer() { return optimizer_; }
    const ZeroStats& last_step() const { return stats_; }

private:
    bool owns(const Tensor& p) const { return owner(p) == rank_; }
    // The message naming an optimizer's parameter that no rank owns (frozen in the module, not in
    // it, or added to the optimizer after this was built), `op` the call; "" when there is none.
    std::string optimizer_parameters_problem(const char* op) const;
    // Throws it as a ValueError.
    void check_optimizer_parameters(const char* op) const;
    void gather_parameters();

    std::unique_ptr<detail::SyncedParameters> synced_;
    optim::Optimizer& optimizer_;
    int stage_;
    int rank_;
    std::vector<int> owner_;                          // per synced parameter
    std::unordered_map<const TensorImpl*, std::size_t> index_;  // parameter → its index
    std::vector<std::vector<std::size_t>> layout_;    // per bucket: its parameters, rank 0's first
    std::vector<int> paths_;                          // the last reduce's detail::GradPath per parameter
    std::vector<std::vector<std::int64_t>> sparse_rows_;  // per parameter: the rows its last sparse step changed
    bool reduced_ = false;                            // reduce_scatter_gradients() ran since the last step()
    std::vector<real> buffer_, mine_, scratch_;       // one bucket, flat: all W segments; this rank's; its pieces
    ZeroStats stats_;
};

}  // namespace xgrad::distributed
