// distributed/detail/synced.hpp — what DistributedDataParallel and ZeroRedundancyOptimizer share
// (internal): the parameters they keep equal on every rank, their buckets, and the first round of
// every sync, which finds out which ranks hold which kind of gradient.
//
// Legend: W ranks, P the trainable parameters when the wrapper was built, Q the module's other
// parameters (frozen then, or registered since).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {
class Module;
}

namespace xgrad::distributed::detail {

// How a parameter's gradient travels in one sync, the same on every rank: Dense when some rank
// holds a dense gradient (a row-sparse one elsewhere is densified), Sparse when every rank that
// holds one holds it row-sparse, None when no rank holds one.
enum class GradPath { None, Dense, Sparse };

class SyncedParameters {
public:
    // Checks that every rank holds the same model (detail::model_text, then `options`: more lines
    // of the wrapper's settings, "stage 2", or none), then copies rank 0's parameters and buffers
    // into every rank's. `who` names the wrapper in messages ("DistributedDataParallel"),
    // `settings` what the comparison covers besides the model ("bucket_bytes"). Collective.
    // Throws ValueError naming the first differing line, or for bucket_bytes 0.
    SyncedParameters(nn::Module& module, std::size_t bucket_bytes, std::string who, const std::string& settings,
                     const std::string& options = "");

    nn::Module& module() const { return module_; }
    // The trainable parameters when built, in named_parameters() order.
    const NamedTensors& params() const { return params_; }
    // Indices into params(), in order, filled up to bucket_bytes; a larger parameter is alone.
    const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }

    // Round 1 of a sync, collective: each parameter's GradPath. Before anything is sent, throws
    // ValueError on every rank alike (`op` names the call) when a parameter's shape differs between
    // ranks or was swapped through mutable_data(), or when some rank holds a gradient for a
    // parameter no bucket holds. Sends a 64-bit hash and 2P + Q doubles.
    std::vector<GradPath> gradient_paths(const char* op) const;

private:
    nn::Module& module_;
    std::string who_;
    NamedTensors params_;          // the trainable parameters, named_parameters() order
    NamedTensors frozen_params_;   // the frozen parameters, held so that their addresses stay theirs
    std::vector<const TensorImpl*> synced_, frozen_;  // the addresses of both, sorted
    std::vector<std::vector<std::size_t>> buckets_;
};

// Parameter p's gradient as `n` dense numbers scaled by `factor` into out: the dense gradient, a
// row-sparse one densified, or zeros when p has none.
void dense_gradient(const Tensor& p, real factor, real* out);
// Sets p's gradient to the n dense numbers at `values`: written into a dense gradient in place,
// or a new dense gradient replacing none or a row-sparse one.
void set_dense_gradient(Tensor& p, const real* values);
// Rank r's segment of the sum over the ranks of `send`, added in rank order:
//     out[j] = ((x_0[j] + x_1[j]) + x_2[j]) + ... + x_{W−1}[j]
// where x_q is rank q's `send` and segment q holds counts[q] elements at offset Σ_{p<q} counts[p].
// Each element's sum is the same fold however the segments are cut, so DDP (even segments) and
// ZeRO (one segment per owner) compute the same bits at any W and on any transport. It sends what
// a ring reduce-scatter sends, (W − 1)/W of the buffer per rank, in one MPI_Alltoallv; `scratch`
// receives the W pieces of segment r. Collective.
void reduce_scatter_by_alltoall(const std::vector<real>& send, const std::vector<std::size_t>& counts,
                                std::vector<real>& scratch, real* out);
// The same sums: at W = 2 by MPI's own reduce-scatter (a sum of two numbers is the same in either
// order, and MPI's collective is the faster: bench/README.md, T9), beyond by the all-to-all above.
void reduce_scatter_in_rank_order(const std::vector<real>& send, const std::vector<std::size_t>& counts,
                                  std::vector<real>& scratch, real* out);
// buffer ← the sum over the ranks of `buffer`, every element added in rank order, on every rank:
// at W = 2 one MPI_Allreduce; beyond, reduce_scatter_in_rank_order on W even segments, then an
// all-gather. Collective.
void all_reduce_in_rank_order(std::vector<real>& buffer, std::vector<real>& scratch, std::vector<real>& segment);
// The mean over the ranks of p's row-sparse gradient (distributed::all_reduce of SparseGrad),
// every rank's rows in the union; a rank that looked up no row contributes none. Collective.
SparseGrad mean_sparse_gradient(const Tensor& p);

}  // namespace xgrad::distributed::detail
