// distributed/detail/synced.cpp — the parameters a data-parallel wrapper keeps equal on every rank:
// the check and broadcast when it is built, the buckets, and the census that opens every sync.
#include <xgrad/distributed/detail/synced.hpp>

#include <algorithm>

#include <fmt/format.h>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/distributed/distributed.hpp>
#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/signature.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::distributed::detail {

namespace {

bool holds(const std::vector<const TensorImpl*>& sorted, const TensorImpl* t) {
    return std::binary_search(sorted.begin(), sorted.end(), t);
}

}  // namespace

std::string model_text(const nn::Module& m, std::size_t bucket_bytes, backend::Number type) {
    std::string lines = fmt::format("elements {}\n", type_name(type));
    for (const auto& [name, p] : m.named_parameters())
        lines += fmt::format("parameter {} {}{}\n", name, shape_str(p.shape()), p.requires_grad() ? "" : " frozen");
    for (const auto& [name, b] : m.named_buffers()) lines += fmt::format("buffer {} {}\n", name, shape_str(b.shape()));
    return lines + fmt::format("bucket_bytes {}", bucket_bytes);
}

SyncedParameters::SyncedParameters(nn::Module& module, std::size_t bucket_bytes, std::string who,
                                   const std::string& settings, const std::string& options)
    : module_(module), who_(std::move(who)) {
    // First: a bad option on one rank is then seen by all.
    check_same_on_all_ranks(fmt::format("{}: the model (element type, parameters, buffers, {})", who_, settings),
                            model_text(module, bucket_bytes, kReal) + (options.empty() ? "" : "\n" + options));
    check(bucket_bytes > 0, who_.c_str(), "bucket_bytes must be positive, got 0");
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
    const std::size_t cap = std::max<std::size_t>(1, bucket_bytes / sizeof(real));
    std::size_t filled = 0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const std::size_t n = std::size_t(params_[i].second.numel());
        if (buckets_.empty() || (filled > 0 && filled + n > cap)) {
            buckets_.emplace_back();
            filled = 0;
        }
        buckets_.back().push_back(i);
        filled += n;
    }
}

std::vector<GradPath> SyncedParameters::gradient_paths(const char* op) const {
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
            check_parameter_shape(*params_[i].second.impl(), op);
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
        check_same_on_all_ranks(fmt::format("{}: the parameters", op), text);
    }
    if (!swapped.empty()) throw ValueError(swapped);  // the ranks' texts agree: every rank refuses alike
    std::vector<double> counts(2 * P + Q, 0.0);  // [dense_0, sparse_0, ..., dense_{P-1}, sparse_{P-1}, any_0, ...]
    for (std::size_t i = 0; i < P; ++i) {
        const Tensor& p = params_[i].second;
        counts[2 * i] = p.has_grad() && p.sparse_grad() == nullptr;
        counts[2 * i + 1] = p.sparse_grad() != nullptr;
    }
    for (std::size_t q = 0; q < Q; ++q) counts[2 * P + q] = others[q].second.has_grad() || others[q].second.sparse_grad();
    // The text compared above is this round's signature: the counts go to the transport directly.
    backend::all_reduce_sum(counts.data(), counts.size(), backend::Number::Double);
    for (std::size_t q = 0; q < Q; ++q) {
        if (counts[2 * P + q] == 0) continue;
        const bool frozen = holds(frozen_, others[q].second.impl());
        throw ValueError(fmt::format(
            "{}: {} has a gradient on {} of {} ranks, but {} when this {} was built, so no bucket holds it and each "
            "rank would step with its own; build the {} after {} (as PyTorch's DDP, it syncs the parameters "
            "trainable when built)",
            op, others[q].first, int(counts[2 * P + q]), world_size(),
            frozen ? "was frozen (requires_grad false)" : "was not a parameter of the module", who_, who_,
            frozen ? "unfreezing" : "changing the model"));
    }
    std::vector<GradPath> paths(P, GradPath::None);
    for (std::size_t i = 0; i < P; ++i)
        paths[i] = counts[2 * i] > 0 ? GradPath::Dense : counts[2 * i + 1] > 0 ? GradPath::Sparse : GradPath::None;
    return paths;
}

void dense_gradient(const Tensor& p, real factor, real* out) {
    const std::size_t n = std::size_t(p.numel());
    if (const SparseGrad* sg = p.sparse_grad()) {
        const Array dense = sg->to_dense();  // (V, d): this rank's rows, for a table dense elsewhere
        for (std::size_t j = 0; j < n; ++j) out[j] = dense.data()[j] * factor;
    } else if (p.has_grad()) {
        const Tensor g = p.grad();
        const real* v = g.data().data();
        for (std::size_t j = 0; j < n; ++j) out[j] = v[j] * factor;
    } else {
        std::fill_n(out, n, real(0));
    }
}

void set_dense_gradient(Tensor& p, const real* values) {
    const std::size_t n = std::size_t(p.numel());
    if (p.has_grad() && p.sparse_grad() == nullptr) {  // a dense gradient: overwritten in place
        Tensor g = p.grad();
        std::copy_n(values, n, g.mutable_data().data());
    } else {  // none, or row-sparse here: replaced by a dense one
        Array dense(p.data().shape());
        std::copy_n(values, n, dense.data());
        set_leaf_grad(*p.impl(), Grad(std::move(dense)));
    }
}

void reduce_scatter_by_alltoall(const std::vector<real>& send, const std::vector<std::size_t>& counts,
                                std::vector<real>& scratch, real* out) {
    const std::size_t W = counts.size(), r = std::size_t(rank()), n = counts[r];
    std::vector<std::size_t> send_bytes(W), recv_bytes(W, n * sizeof(real));
    for (std::size_t q = 0; q < W; ++q) send_bytes[q] = counts[q] * sizeof(real);
    scratch.resize(W * n);  // piece q: rank q's numbers of segment r
    backend::all_to_all_v(send.data(), send_bytes, scratch.data(), recv_bytes);
    std::copy_n(scratch.data(), n, out);
    for (std::size_t q = 1; q < W; ++q) {
        const real* x = scratch.data() + q * n;
        for (std::size_t j = 0; j < n; ++j) out[j] += x[j];
    }
}

void reduce_scatter_in_rank_order(const std::vector<real>& send, const std::vector<std::size_t>& counts,
                                  std::vector<real>& scratch, real* out) {
    profiler::RecordFunction event("reduce_scatter (bucket)", profiler::Kind::collective);
    event.bytes_sent(send.size() * sizeof(real));
    if (counts.size() == 2) backend::reduce_scatter_v_sum(send.data(), out, counts, kReal);
    else reduce_scatter_by_alltoall(send, counts, scratch, out);
}

void all_reduce_in_rank_order(std::vector<real>& buffer, std::vector<real>& scratch, std::vector<real>& segment) {
    const std::size_t n = buffer.size(), W = std::size_t(world_size());
    profiler::RecordFunction event("all_reduce (bucket)", profiler::Kind::collective);  // while profiling
    event.bytes_sent(n * sizeof(real));
    if (W == 2) return backend::all_reduce_sum(buffer.data(), n, kReal);
    std::vector<std::size_t> counts(W), bytes(W);
    for (std::size_t q = 0; q < W; ++q) {
        counts[q] = n / W + (q < n % W ? 1 : 0);
        bytes[q] = counts[q] * sizeof(real);
    }
    segment.resize(counts[std::size_t(rank())]);
    reduce_scatter_by_alltoall(buffer, counts, scratch, segment.data());
    backend::all_gather_v(segment.data(), bytes, buffer.data());
}

SparseGrad mean_sparse_gradient(const Tensor& p) {
    SparseGrad none;  // this rank looked up no row of the table
    if (p.sparse_grad() == nullptr) {
        none.dense_shape = p.shape();
        none.values = Array(ArrayShape{0, p.data().shape()[1]});
    }
    return all_reduce(p.sparse_grad() ? *p.sparse_grad() : none, ReduceOp::Mean);
}

}  // namespace xgrad::distributed::detail
