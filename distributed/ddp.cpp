// distributed/ddp.cpp — DistributedDataParallel: the broadcast at construction, and the bucketed
// mean of the gradients after backward. The argument for the mean: distributed/README.md.
#include <xgrad/distributed/ddp.hpp>

#include <algorithm>
#include <chrono>
#include <type_traits>

#include <fmt/format.h>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/signature.hpp>
#include <xgrad/distributed/detail/synced.hpp>

namespace xgrad::distributed {

using detail::GradPath;

DistributedDataParallel::DistributedDataParallel(nn::Module& module, DDPOptions options)
    : synced_(std::make_unique<detail::SyncedParameters>(module, options.bucket_bytes(), "DistributedDataParallel",
                                                         "bucket_bytes")) {
    for (const std::vector<std::size_t>& members : synced_->buckets()) {
        Bucket& b = buckets_.emplace_back();
        for (std::size_t i : members) {
            b.names.push_back(synced_->params()[i].first);
            b.numel += std::size_t(synced_->params()[i].second.numel());
        }
    }
}

DistributedDataParallel::~DistributedDataParallel() = default;

nn::Module& DistributedDataParallel::module() { return synced_->module(); }

void DistributedDataParallel::sync_gradients() {
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = SyncStats{};
    const std::vector<GradPath> path = synced_->gradient_paths("DistributedDataParallel::sync_gradients");  // round 1
    const double W = world_size();
    if (W == 1) return;  // alone, every gradient is already its own mean
    const NamedTensors& params = synced_->params();

    // Dense: one flat buffer per bucket ← the gradients divided by W (zeros where this rank has
    // none), summed over the ranks in one all-reduce, copied back.
    std::vector<real>& buffer = buffer_;  // kept between steps: no allocation, no fresh pages
    for (const std::vector<std::size_t>& members : synced_->buckets()) {
        buffer.clear();
        for (std::size_t i : members) {
            if (path[i] != GradPath::Dense) continue;
            const std::size_t at = buffer.size();
            buffer.resize(at + std::size_t(params[i].second.numel()));
            // divide, then sum: overflows only where the mean does
            detail::dense_gradient(params[i].second, real(1) / real(W), buffer.data() + at);
        }
        if (buffer.empty()) continue;
        detail::all_reduce_in_rank_order(buffer, scratch_, segment_);  // the same sums as ZeRO's
        ++stats_.all_reduces;
        stats_.dense_bytes += buffer.size() * sizeof(real);
        std::size_t at = 0;
        for (std::size_t i : members) {
            if (path[i] != GradPath::Dense) continue;
            Tensor p = params[i].second;
            detail::set_dense_gradient(p, buffer.data() + at);
            at += std::size_t(p.numel());
        }
    }

    // Row-sparse: the union of the ranks' rows, summed and divided by W, kept row-sparse.
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (path[i] != GradPath::Sparse) continue;
        Tensor p = params[i].second;
        if (p.sparse_grad()) stats_.sparse_rows += p.sparse_grad()->indices.size();
        SparseGrad mean = detail::mean_sparse_gradient(p);
        set_leaf_grad(*p.impl(), Grad(RowSparseGrad{std::move(mean.indices), std::move(mean.values), /*keep_sparse=*/true}));
    }
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace xgrad::distributed
