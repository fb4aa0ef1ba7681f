// distributed/ddp.hpp — DistributedDataParallel: the same model on every rank, each rank on its
// slice of the global batch, gradients averaged so that every rank takes the same step.
//
// Legend: W ranks, B global batch, b = B/W windows per rank, θ the parameters, L the loss.
//
// Why averaging is exact. The loss of a step is the mean over the global batch. Split it into W
// equal slices S_r of b examples each; then
//     L(θ) = 1/B Σ_{i<B} ℓ_i(θ) = 1/W Σ_r ( 1/b Σ_{i∈S_r} ℓ_i(θ) ) = 1/W Σ_r L_r(θ),
// and the gradient is linear, so ∇L = 1/W Σ_r ∇L_r: the mean of the per-rank gradients of the
// per-rank mean losses. After that mean every rank holds the same ∇L, so the same optimizer step
// keeps the W copies of θ equal, as long as they started equal (the constructor broadcasts rank 0's
// θ). Only the order of the sums differs from one process on the whole batch: the results agree
// to rounding, not bit for bit. With unequal slices the mean would weight the short slice's
// examples more; the examples refuse a batch that W does not divide.
//
// Buckets. One all-reduce per parameter would pay MPI's latency ~50 times per step; one for all
// of them would need a buffer of every gradient. DDP packs the dense gradients into buckets of at
// most bucket_bytes (PyTorch's bucket_cap_mb, 25 MiB), copies each bucket's gradients into one
// flat buffer, all-reduces it, and copies the means back.
//
// Row-sparse gradients (Embedding with sparse) are not packed: their rows differ by rank, so each
// is combined by distributed::all_reduce(SparseGrad): the union of the ranks' rows, summed row by
// row, divided by W. Lazy Adam then updates the same rows on every rank. A parameter whose
// gradient is dense on some rank (a tied table: the head's product is dense) takes the dense
// path on every rank, the sparse ones densified first, so the sum stays right.
//
// The training loop calls sync_gradients() itself, between backward and the step:
//     opt.zero_grad();  loss.backward();  ddp.sync_gradients();  clip_grad_norm_(...);  opt.step();
// PyTorch's DDP wraps the module's forward and starts each bucket's all-reduce from autograd hooks
// while backward still runs. xgrad's modules have no common forward signature and its autograd no
// per-parameter hooks, and the explicit call shows where the communication happens. It gives up
// the overlap of communication with backward (bench/README.md, T4, gives the all-reduce's share).
//
// ref: Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training";
// PyTorch docs, torch.nn.parallel.DistributedDataParallel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <xgrad/distributed/distributed.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::distributed {

struct DDPOptions {
    // Dense gradients per all-reduce, in bytes; a parameter larger than this is a bucket alone.
    std::size_t bucket_bytes = std::size_t(25) << 20;
    DDPOptions& set_bucket_bytes(std::size_t b) { bucket_bytes = b; return *this; }
};

// The parameters whose dense gradients share one all-reduce, in named_parameters() order.
struct Bucket {
    std::vector<std::string> names;
    std::size_t numel = 0;  // Σ of the parameters' sizes, elements
};

// What the last sync_gradients() sent.
struct SyncStats {
    std::size_t all_reduces = 0;    // all-reduce calls for the dense buckets (0 with one rank)
    std::size_t dense_bytes = 0;    // bytes of dense gradient each rank contributed
    std::size_t sparse_rows = 0;    // rows of row-sparse gradient this rank contributed
    double seconds = 0;             // wall time of the call, s
};

class DistributedDataParallel {
public:
    // Checks that every rank holds the same parameter and buffer names and shapes, the same frozen
    // parameters and the same bucket_bytes, then copies rank 0's values into every rank's
    // (broadcast). Collective: every rank constructs it together. Throws ValueError naming the
    // first line where a rank's model differs from rank 0's, or for bucket_bytes 0.
    explicit DistributedDataParallel(nn::Module& module, DDPOptions options = {});

    // Every parameter's gradient becomes its mean over the ranks (see above). A parameter no rank
    // has a gradient for keeps none; one that only some ranks have counts as zeros on the others.
    // Collective. Call after the last backward of the step, before clipping and opt.step(). With
    // one rank it returns at once. Forgetting it is not detected: the ranks' weights drift apart.
    void sync_gradients();

    nn::Module& module() { return module_; }
    const std::vector<Bucket>& buckets() const { return buckets_; }
    const SyncStats& last_sync() const { return stats_; }

private:
    nn::Module& module_;
    NamedTensors params_;          // the trainable parameters, named_parameters() order
    std::vector<Bucket> buckets_;
    std::vector<std::vector<std::size_t>> bucket_params_;  // indices into params_, per bucket
    std::vector<real> buffer_;     // one bucket's gradients, flat
    SyncStats stats_;
};

}  // namespace xgrad::distributed
