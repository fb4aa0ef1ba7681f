// distributed/ddp.hpp — DistributedDataParallel: the same model on every rank, each rank on its
// slice of the global batch, gradients averaged so that every rank takes the same step.
//
// Legend: W ranks, B global batch, b = B/W rows per rank, θ the parameters, L the loss.
// ∇L = (1/W) Σ_r ∇L_r: the mean of the ranks' gradients is the whole batch's gradient, when the
// slices are equal and every rank starts from the same θ (the constructor broadcasts rank 0's).
// distributed/README.md explains: "Why the mean of the gradients is the gradient", "Buckets"
// (dense and row-sparse gradients), "The training loop" (why the loop calls the sync itself):
//     opt.zero_grad();  loss.backward();  ddp.sync_gradients();  clip_grad_norm_(...);  opt.step();
//
// ref: Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training";
// PyTorch docs, torch.nn.parallel.DistributedDataParallel.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <xgrad/distributed/distributed.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::distributed {

namespace detail {
class SyncedParameters;
}

// As LibTorch's options: DDPOptions().bucket_bytes(1 << 20).
class DDPOptions {
public:
    DDPOptions& bucket_bytes(std::size_t v) { bucket_bytes_ = v; return *this; }

    // Dense gradients per all-reduce, bytes (25 MiB, PyTorch's bucket_cap_mb); a larger parameter
    // is a bucket alone.
    std::size_t bucket_bytes() const { return bucket_bytes_; }

private:
    std::size_t bucket_bytes_ = std::size_t(25) << 20;
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
    // Checks that every rank holds the same element type (float32 or float64), parameter and buffer
    // names and shapes, the same frozen parameters and the same bucket_bytes, then copies rank 0's
    // values into every rank's (broadcast). The parameters trainable now are the ones it syncs, as
    // PyTorch's DDP registers its parameters when built. Collective: every rank constructs it
    // together. Throws ValueError naming the first line where a rank's model differs from rank
    // 0's, or for bucket_bytes 0.
    explicit DistributedDataParallel(nn::Module& module, DDPOptions options = {});
    ~DistributedDataParallel();

    // Every parameter's gradient becomes its mean over the ranks (distributed/README.md). A parameter no rank
    // has a gradient for keeps none; one that only some ranks have counts as zeros on the others.
    // Collective. Call after the last backward of the step, before clipping and opt.step(). With
    // one rank it sends nothing. Forgetting it is not detected: the ranks' weights drift apart.
    // Before the gradients it sends a 64-bit hash and 2P + Q doubles (README, "What each sync
    // checks"), and throws the same ValueError on every rank, changing no gradient, when a
    // parameter's shape differs between ranks (set_data on one), or when a rank holds a gradient
    // for a parameter frozen when this was built, or registered since: build it after unfreezing.
    void sync_gradients();

    nn::Module& module();
    const std::vector<Bucket>& buckets() const { return buckets_; }
    const SyncStats& last_sync() const { return stats_; }

private:
    std::unique_ptr<detail::SyncedParameters> synced_;  // the parameters, their buckets, round 1 of a sync
    std::vector<Bucket> buckets_;
    std::vector<real> buffer_;     // one bucket's gradients, flat
    std::vector<real> segment_, scratch_;  // this rank's segment of it; the ranks' pieces of that segment
    SyncStats stats_;
};

}  // namespace xgrad::distributed
