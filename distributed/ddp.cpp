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

namespace xgrad::distributed {

namespace {

enum Kind : int { kNone = 0, kSparse = 1, kDense = 2 };

Kind kind_of(const Tensor& p) {
    if (p.sparse_grad() != nullptr) return kSparse;
    return p.has_grad() ? kDense : kNone;
}

bool holds(const std::vector<const TensorImpl*>& sorted, const TensorImpl* t) {
    return std::binary_search(sorted.begin(), sorted.end(), t);
}

}  // namespace

std::string detail::model_text(const nn::Module& m, std::size_t bucket_bytes, backend::Number type) {
    std::string lines = fmt::format("elements {}\n", type_name(type));
    for (const auto& [name, p] : m.named_parameters())
        lines += fmt::format("parameter {} {}{}\n", name, shape_str(p.shape()), p.requires_grad() ? "" : " frozen");
    for (const auto& [name, b] : m.named_buffers()) lines += fmt::format("buffer {} {}\n", name, shape_str(b.shape()));
    return lines + fmt::format("bucket_bytes {}", bucket_bytes);
}

DistributedDataParallel::DistributedDataParallel(nn::Module& module, DDPOptions options) : module_(module) {
    // First: a bad option on one rank is then seen by all.
    check_same_on_all_ranks("DistributedDataParallel: the model (element type, parameters, buffers, bucket_bytes)",
                            detail::model_text(module, options.bucket_bytes(), detail::kReal));
    check(options.bucket_bytes() > 0, "DistributedDataParallel", "bucket_bytes must be positive, got 0");
    {
        NoGradGuard no_grad;  // θ_r ← θ_0 on every rank, parameters and buffers alike
        for (auto& [name, p] : module.named_parameters()) broadcast(p, 0);
        for (auto& [name, b] : module.named_buffers()) broadcast(b, 0);
    }
    for (auto& [name, p] : module.named_parameters()) {
        (p.requires_grad() ? params_ : frozen_params_).emplace_back(name, p);
        (p.requires_grad() ? synced_ : frozen_).push_back(p.impl());
    }
    std::sort(synced_.begin(), synced_.end());
    std::sort(frozen_.begin(), frozen_.end());
    // Fill buckets in order, closing one when the next parameter would take it past the cap.
    const std::size_t cap = std::max<std::size_t>(1, options.bucket_bytes() / sizeof(real));
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const std::size_t n = std::size_t(params_[i].second.numel());
        if (buckets_.empty() || (buckets_.back().numel > 0 && buckets_.back().numel + n > cap)) {
            buckets_.emplace_back();
            bucket_params_.emplace_back();
        }
        buckets_.back().names.push_back(params_[i].first);
        buckets_.back().numel += n;
        bucket_params_.back().push_back(i);
    }
}

std::vector<double> DistributedDataParallel::count_gradients() const {
    // The parameters of the module now that no bucket holds: frozen when this was built, or
    // registered since. A gradient on one of them would stay each rank's own.
    NamedTensors others;
    for (auto& [name, p] : module_.named_parameters())
        if (!holds(synced_, p.impl())) others.emplace_back(name, p);
    const std::size_t P = params_.size(), Q = others.size();
    auto since = [&](const Tensor& p) { return holds(frozen_, p.impl()) ? "frozen when built" : "registered since"; };
    // A parameter whose array was swapped for another shape (mutable_data(), not set_data()) keeps a
    // gradient of its old shape, which a bucket would read p.numel() numbers from: refused, as by backward.
    std::string swapped;
    std::vector<bool> is_swapped(P, false);
    for (std::size_t i = 0; i < P; ++i) {
        try {
            check_parameter_shape(*params_[i].second.impl(), "DistributedDataParallel::sync_gradients");
        } catch (const ValueError& e) {
            is_swapped[i] = true;
            if (swapped.empty()) swapped = e.what();
        }
    }
    if (world_size() > 1) {  // the shapes fix the buckets' sizes: MPI must receive as many numbers as each rank sends
        std::string text;
        for (std::size_t i = 0; i < P; ++i)
            text += fmt::format("parameter {} {}{}\n", params_[i].first, shape_str(params_[i].second.shape()),
                                is_swapped[i] ? " resized through mutable_data()" : "");
        for (const auto& [name, p] : others) text += fmt::format("not synced {} ({})\n", name, since(p));
        check_same_on_all_ranks("DistributedDataParallel::sync_gradients: the parameters", text);
    }
    if (!swapped.empty()) throw ValueError(swapped);  // the ranks' texts agree: every rank refuses alike
    std::vector<double> counts(2 * P + Q, 0.0);  // [dense_0, sparse_0, ..., dense_{P-1}, sparse_{P-1}, any_0, ...]
    for (std::size_t i = 0; i < P; ++i) {
        const Kind k = kind_of(params_[i].second);
        counts[2 * i] = k == kDense;
        counts[2 * i + 1] = k == kSparse;
    }
    for (std::size_t q = 0; q < Q; ++q) counts[2 * P + q] = kind_of(others[q].second) != kNone;
    // The text compared above is this round's signature: the counts go to the transport directly.
    backend::all_reduce_sum(counts.data(), counts.size(), backend::Number::Double);
    for (std::size_t q = 0; q < Q; ++q) {
        if (counts[2 * P + q] == 0) continue;
        const bool frozen = holds(frozen_, others[q].second.impl());
        throw ValueError(fmt::format(
            "DistributedDataParallel::sync_gradients: {} has a gradient on {} of {} ranks, but {} when this "
            "DistributedDataParallel was built, so no bucket holds it and each rank would step with its own; "
            "build the DistributedDataParallel after {} (as PyTorch's DDP, it syncs the parameters trainable when built)",
            others[q].first, int(counts[2 * P + q]), world_size(),
            frozen ? "was frozen (requires_grad false)" : "was not a parameter of the module",
            frozen ? "unfreezing" : "changing the model"));
    }
    counts.resize(2 * P);
    return counts;
}

void DistributedDataParallel::sync_gradients() {
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = SyncStats{};
    const std::vector<double> counts = count_gradients();  // round 1: refuses on every rank alike
    const double W = world_size();
    if (W == 1) return;  // alone, every gradient is already its own mean
    auto path = [&](std::size_t i) { return counts[2 * i] > 0 ? kDense : counts[2 * i + 1] > 0 ? kSparse : kNone; };

    // Dense: one flat buffer per bucket ← the gradients (zeros where this rank has none), divided
    // by W, summed over the ranks in one all-reduce, copied back.
    std::vector<real>& buffer = buffer_;  // kept between steps: no allocation, no fresh pages
    for (const std::vector<std::size_t>& members : bucket_params_) {
        buffer.clear();
        for (std::size_t i : members) {
            if (path(i) != kDense) continue;
            const Tensor& p = params_[i].second;
            const std::size_t at = buffer.size(), n = std::size_t(p.numel());
            buffer.resize(at + n, real(0));
            if (const SparseGrad* sg = p.sparse_grad()) {
                const Array dense = sg->to_dense();  // (V, d): this rank's rows, for a table dense elsewhere
                std::copy_n(dense.data(), n, buffer.data() + at);
            } else if (p.has_grad()) {
                const Tensor g = p.grad();
                std::copy_n(g.data().data(), n, buffer.data() + at);
            }
        }
        if (buffer.empty()) continue;
        const real inv_w = real(1) / real(W);
        for (real& v : buffer) v *= inv_w;  // divide, then sum: overflows only where the mean does
        backend::all_reduce_sum(buffer.data(), buffer.size(), detail::kReal);
        ++stats_.all_reduces;
        stats_.dense_bytes += buffer.size() * sizeof(real);
        std::size_t at = 0;
        for (std::size_t i : members) {
            if (path(i) != kDense) continue;
            Tensor& p = params_[i].second;
            const std::size_t n = std::size_t(p.numel());
            if (p.has_grad() && p.sparse_grad() == nullptr) {  // a dense gradient: overwritten in place
                Tensor g = p.grad();
                std::copy_n(buffer.data() + at, n, g.mutable_data().data());
            } else {  // none, or row-sparse here: replaced by a dense one
                Array mean(p.data().shape());
                std::copy_n(buffer.data() + at, n, mean.data());
                set_leaf_grad(*p.impl(), Grad(std::move(mean)));
            }
            at += n;
        }
    }

    // Row-sparse: the union of the ranks' rows, summed and divided by W, kept row-sparse.
    for (std::size_t i = 0; i < params_.size(); ++i) {
        if (path(i) != kSparse) continue;
        Tensor& p = params_[i].second;
        SparseGrad empty;  // this rank looked up no row of the table
        if (p.sparse_grad() == nullptr) {
            empty.dense_shape = p.shape();
            empty.values = Array(ArrayShape{0, p.data().shape()[1]});
        }
        const SparseGrad& mine = p.sparse_grad() ? *p.sparse_grad() : empty;
        stats_.sparse_rows += mine.indices.size();
        SparseGrad mean = all_reduce(mine, ReduceOp::Mean);
        set_leaf_grad(*p.impl(), Grad(RowSparseGrad{std::move(mean.indices), std::move(mean.values), /*keep_sparse=*/true}));
    }
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace xgrad::distributed
