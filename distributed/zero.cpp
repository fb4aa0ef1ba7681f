// distributed/zero.cpp — ZeroRedundancyOptimizer: the owners, the reduce-scatter of the
// gradients, the owners' step, the all-gather of the parameters, and the state gathered whole for
// a checkpoint. The argument and the byte counts: distributed/README.md, "Sharding the optimizer".
//
// Legend: W ranks, r this rank, q any rank, P the synced parameters, n_i parameter i's elements,
// k the rows of a row-sparse gradient.
#include <xgrad/distributed/zero.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/signature.hpp>
#include <xgrad/distributed/detail/synced.hpp>
#include <xgrad/optim/clip_grad.hpp>

namespace xgrad::distributed {

using detail::GradPath;

namespace {

// Owners for one bucket's parameters: largest first, each to the rank holding the fewest elements
// so far (`load`, over all buckets; ties to the lowest rank). Every rank computes the same.
void assign_owners(const std::vector<std::size_t>& members, const NamedTensors& params, std::vector<std::size_t>& load,
                   std::vector<int>& owner) {
    std::vector<std::size_t> order = members;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return params[a].second.numel() > params[b].second.numel();
    });
    for (std::size_t i : order) {
        const auto least = std::min_element(load.begin(), load.end());
        owner[i] = int(least - load.begin());
        *least += std::size_t(params[i].second.numel());
    }
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(nn::Module& module, optim::Optimizer& optimizer, ZeroOptions options)
    : synced_(std::make_unique<detail::SyncedParameters>(module, options.bucket_bytes(), "ZeroRedundancyOptimizer",
                                                         "bucket_bytes, stage, optimizer",
                                                         fmt::format("stage {}\noptimizer {}", options.stage(),
                                                                     optimizer.name()))),
      optimizer_(optimizer), stage_(options.stage()), rank_(rank()) {
    const char* op = "ZeroRedundancyOptimizer";
    check(stage_ == 1 || stage_ == 2, op, "stage must be 1 (the optimizer state sharded) or 2 (the gradients too), got {}",
          stage_);
    const NamedTensors& params = synced_->params();
    for (std::size_t i = 0; i < params.size(); ++i) index_.emplace(params[i].second.impl(), i);
    // The optimizer's parameters must be the module's trainable ones: a rank steps what it owns.
    // Each rank built its own optimizer, so the ranks agree on the outcome before any refuses.
    std::string refused = optimizer_parameters_problem(op);
    std::set<const TensorImpl*> in_optimizer;
    for (const optim::ParamGroup& g : optimizer.param_groups())
        for (const auto& [name, p] : g.params) in_optimizer.insert(p.impl());
    for (const auto& [name, p] : params)
        if (refused.empty() && in_optimizer.count(p.impl()) == 0)
            refused = fmt::format("{}: the module's parameter '{}' is not in the optimizer, so no rank would step it; "
                                  "build the optimizer over the module's named_parameters()", op, name);
    const std::vector<std::string> texts = gather_if_different(refused);  // empty: every rank alike
    for (std::size_t q = 0; q < texts.size(); ++q)
        if (!texts[q].empty()) throw ValueError(fmt::format("{} (on rank {})", texts[q], q));
    if (!refused.empty()) throw ValueError(refused);
    // Owners, and each bucket laid out rank by rank: segment q of a reduce-scatter is rank q's.
    const int W = world_size();
    owner_.assign(params.size(), 0);
    std::vector<std::size_t> load(std::size_t(W), 0);
    for (const std::vector<std::size_t>& members : synced_->buckets()) {
        assign_owners(members, params, load, owner_);
        std::vector<std::size_t>& layout = layout_.emplace_back(members);
        std::stable_sort(layout.begin(), layout.end(), [&](std::size_t a, std::size_t b) { return owner_[a] < owner_[b]; });
    }
    paths_.assign(params.size(), int(GradPath::None));
    sparse_rows_.resize(params.size());
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

std::string ZeroRedundancyOptimizer::optimizer_parameters_problem(const char* op) const {
    for (const optim::ParamGroup& g : optimizer_.param_groups())
        for (const auto& [name, p] : g.params) {
            if (index_.count(p.impl())) continue;
            bool in_module = false, frozen = false;
            for (const auto& [module_name, q] : synced_->module().named_parameters())
                if (q.impl() == p.impl()) in_module = true, frozen = !q.requires_grad();
            if (frozen)
                return fmt::format("{}: the optimizer's parameter '{}' is frozen (requires_grad false) in the module, so "
                                   "no rank would receive its gradient; build the optimizer over the trainable "
                                   "parameters only", op, name);
            return fmt::format(
                "{}: the optimizer's parameter '{}' is not a {}; a rank steps only the parameters it owns, fixed when "
                "this ZeroRedundancyOptimizer was built: build the optimizer over the module's trainable "
                "named_parameters(), then the ZeroRedundancyOptimizer (after any add_param_group)",
                op, name, in_module ? "trainable parameter of the module when this ZeroRedundancyOptimizer was built"
                                    : "parameter of the module");
        }
    return "";
}

void ZeroRedundancyOptimizer::check_optimizer_parameters(const char* op) const {
    const std::string problem = optimizer_parameters_problem(op);
    if (!problem.empty()) throw ValueError(problem);
}

int ZeroRedundancyOptimizer::owner(const Tensor& param) const {
    auto it = index_.find(param.impl());
    check(it != index_.end(), "ZeroRedundancyOptimizer::owner", "the tensor is not a trainable parameter of the module");
    return owner_[it->second];
}

NamedTensors ZeroRedundancyOptimizer::owned_parameters() const {
    NamedTensors mine;
    for (std::size_t i = 0; i < owner_.size(); ++i)
        if (owner_[i] == rank_) mine.push_back(synced_->params()[i]);
    return mine;
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
    optimizer_.zero_grad(set_to_none);
    reduced_ = false;  // a new step's gradients: the next reduce is its first
}

void ZeroRedundancyOptimizer::reduce_scatter_gradients() {
    const char* op = "ZeroRedundancyOptimizer::reduce_scatter_gradients";
    // Not idempotent, unlike DDP's all-reduce: after one, rank q holds the mean of its own
    // parameters and 0 (or nothing) for the others, so a second would leave the mean / W.
    check(!reduced_, op, "called again before step() or zero_grad(): each rank already holds the mean gradient of "
          "its own parameters and has sent the others', so a second reduce would divide the mean by W again; call "
          "step(), or zero_grad() to start the step over");
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = ZeroStats{};
    const std::vector<GradPath> path = synced_->gradient_paths(op);
    const NamedTensors& params = synced_->params();
    for (std::size_t i = 0; i < params.size(); ++i) paths_[i] = int(path[i]);
    reduced_ = true;
    const int W = world_size();
    if (W == 1) return;  // alone: every gradient is its own mean, and every parameter this rank's

    // Dense: bucket b's gradients divided by W, laid out rank by rank; segment q, summed over the
    // ranks, goes to rank q (counts[q] elements: rank q's parameters with a dense gradient).
    for (const std::vector<std::size_t>& layout : layout_) {
        std::vector<std::size_t> counts(std::size_t(W), 0);
        buffer_.clear();
        for (std::size_t i : layout) {
            if (path[i] != GradPath::Dense) continue;
            const std::size_t at = buffer_.size(), n = std::size_t(params[i].second.numel());
            buffer_.resize(at + n);
            detail::dense_gradient(params[i].second, real(1) / real(W), buffer_.data() + at);  // divide, then sum
            counts[std::size_t(owner_[i])] += n;
        }
        if (buffer_.empty()) continue;
        mine_.resize(counts[std::size_t(rank_)]);
        detail::reduce_scatter_in_rank_order(buffer_, counts, scratch_, mine_.data());
        ++stats_.reduce_scatters;
        stats_.reduced_bytes += buffer_.size() * sizeof(real);
        std::size_t at = 0;
        for (std::size_t i : layout) {
            if (path[i] != GradPath::Dense) continue;
            Tensor p = params[i].second;
            if (owner_[i] == rank_) {
                detail::set_dense_gradient(p, mine_.data() + at);
                at += std::size_t(p.numel());
            } else if (stage_ == 1) {
                zero_grad_(*p.impl());  // kept allocated, as stage 1 keeps every gradient
            } else {
                clear_grad(*p.impl());  // stage 2: sent to its owner, freed here
            }
        }
    }
    // Row-sparse: the union of the ranks' rows, averaged (as DDP); the owner keeps it.
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (path[i] != GradPath::Sparse) continue;
        Tensor p = params[i].second;
        if (p.sparse_grad()) stats_.sparse_rows += p.sparse_grad()->indices.size();
        SparseGrad mean = detail::mean_sparse_gradient(p);
        sparse_rows_[i] = mean.indices;  // the rows the owner's lazy step changes
        if (owner_[i] == rank_)
            set_leaf_grad(*p.impl(), Grad(RowSparseGrad{std::move(mean.indices), std::move(mean.values), /*keep_sparse=*/true}));
        else
            clear_grad(*p.impl());
    }
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm, bool error_if_nonfinite) {
    const char* op = "ZeroRedundancyOptimizer::clip_grad_norm_";
    check(max_norm >= 0, op, "max_norm must be >= 0; got {}", max_norm);
    check(reduced_, op, "call reduce_scatter_gradients() first: until then each rank holds its own gradients, not the mean");
    // Σ g² of every parameter as clip_grad_norm_'s 8 partial sums: this rank's own filled, the
    // rest 0, so that the sum over the ranks is each parameter's partials exactly.
    const NamedTensors& params = synced_->params();
    std::vector<double> partials(8 * params.size(), 0.0);
    std::vector<Tensor> mine;
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (owner_[i] != rank_) continue;
        const std::array<double, 8> part = optim::grad_square_partials(params[i].second);
        std::copy(part.begin(), part.end(), partials.begin() + std::ptrdiff_t(8 * i));
        mine.push_back(params[i].second);
    }
    all_reduce(partials, ReduceOp::Sum);
    double acc = 0;  // added in clip_grad_norm_'s order: parameter by parameter, partial by partial
    for (double s : partials) acc += s;
    const double total = std::sqrt(acc);
    optim::scale_to_max_norm_(mine, total, max_norm, 2.0, error_if_nonfinite);
    return total;
}

void ZeroRedundancyOptimizer::step() {
    const auto t0 = std::chrono::steady_clock::now();
    const char* op = "ZeroRedundancyOptimizer::step";
    std::string refused;
    if (!reduced_)
        refused = fmt::format("{}: call reduce_scatter_gradients() after backward and before step(): without it each "
                              "rank would step its parameters with its own gradients", op);
    const auto mine = [&](const Tensor& p) { return owns(p); };
    if (refused.empty()) {
        try {
            check_optimizer_parameters(op);
            optimizer_.check_step(mine);  // the step's checks, before any rank changes anything
        } catch (const std::exception& e) {
            refused = e.what();
        }
    }
    // Every rank learns whether any refused, so that all step or none does, and none waits in the
    // all-gather below.
    const std::vector<std::string> texts = gather_if_different(refused);  // empty: every rank alike
    for (std::size_t q = 0; q < texts.size(); ++q)
        if (!texts[q].empty()) throw ValueError(fmt::format("{}: refused on rank {}: {}", op, q, texts[q]));
    if (!refused.empty()) throw ValueError(refused);  // every rank refused alike
    optimizer_.step(mine);
    reduced_ = false;
    if (world_size() > 1) gather_parameters();
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ZeroRedundancyOptimizer::gather_parameters() {
    const NamedTensors& params = synced_->params();
    const int W = world_size();
    // Dense: every rank's own parameters of the bucket, in the layout's order, to every rank.
    for (const std::vector<std::size_t>& layout : layout_) {
        std::vector<std::size_t> counts(std::size_t(W), 0);  // bytes
        mine_.clear();
        for (std::size_t i : layout) {
            if (paths_[i] != int(GradPath::Dense)) continue;
            const Tensor& p = params[i].second;
            counts[std::size_t(owner_[i])] += std::size_t(p.numel()) * sizeof(real);
            if (owner_[i] == rank_) mine_.insert(mine_.end(), p.data().data(), p.data().data() + p.numel());
        }
        std::size_t total = 0;
        for (std::size_t c : counts) total += c;
        if (total == 0) continue;
        buffer_.resize(total / sizeof(real));
        profiler::RecordFunction event("all_gather (bucket)", profiler::Kind::collective);  // while profiling
        event.bytes_sent(mine_.size() * sizeof(real));
        backend::all_gather_v(mine_.data(), counts, buffer_.data());
        ++stats_.all_gathers;
        stats_.gathered_bytes += total;
        std::size_t at = 0;
        for (std::size_t i : layout) {
            if (paths_[i] != int(GradPath::Dense)) continue;
            TensorImpl& t = *params[i].second.impl();
            if (owner_[i] != rank_) {
                std::copy_n(buffer_.data() + at, t.data.size(), t.data.data());
                ++t.version;  // changed in place, as by a step
            }
            at += t.data.size();
        }
    }
    // Row-sparse: the owner's updated rows (k, d) of the union, to every rank.
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (paths_[i] != int(GradPath::Sparse)) continue;
        TensorImpl& t = *params[i].second.impl();
        const std::size_t d = t.data.shape()[1];
        const std::vector<std::int64_t>& rows = sparse_rows_[i];
        mine_.resize(rows.size() * d);
        if (owner_[i] == rank_)
            for (std::size_t k = 0; k < rows.size(); ++k)
                std::copy_n(t.data.data() + std::size_t(rows[k]) * d, d, mine_.data() + k * d);
        profiler::RecordFunction event("broadcast (rows)", profiler::Kind::collective);
        event.bytes_sent(mine_.size() * sizeof(real));
        backend::broadcast(mine_.data(), mine_.size() * sizeof(real), owner_[i]);
        stats_.broadcast_rows += rows.size();
        if (owner_[i] == rank_) continue;
        for (std::size_t k = 0; k < rows.size(); ++k)
            std::copy_n(mine_.data() + k * d, d, t.data.data() + std::size_t(rows[k]) * d);
        ++t.version;
    }
}

// ---- the state, whole: for a checkpoint that any number of ranks can resume ---------------------

namespace {

// The optimizer's parameters in param_groups() order: the order of its state_dict's tensors.
NamedTensors optimizer_parameters(const optim::Optimizer& opt) {
    NamedTensors all;
    for (const optim::ParamGroup& g : opt.param_groups()) all.insert(all.end(), g.params.begin(), g.params.end());
    return all;
}

}  // namespace

optim::OptimizerState ZeroRedundancyOptimizer::state_dict() const {
    check_optimizer_parameters("ZeroRedundancyOptimizer::state_dict");
    const NamedTensors params = optimizer_parameters(optimizer_);
    const std::vector<std::string> buffers = optimizer_.state_buffer_names();
    const bool counts_steps = optimizer_.counts_steps();
    // Round 1, per parameter: its step count t (SGD: 1) where its owner has stepped it, else 0;
    // the sum over the ranks is the owner's (t ≤ 2^53: exact in a double).
    std::vector<double> stepped(params.size(), 0.0);
    for (std::size_t j = 0; j < params.size(); ++j) {
        const optim::ParamState* st = optimizer_.state_of(params[j].first);
        if (st && owns(params[j].second)) stepped[j] = counts_steps ? double(st->step) : 1.0;
    }
    distributed::all_reduce(stepped, ReduceOp::Sum);
    // Then each buffer of each stepped parameter, from its owner's state straight into a tensor on
    // rank 0: no rank copies its share first, and rank 0 holds what one process's state_dict() does.
    optim::OptimizerState whole;
    if (rank_ == 0) whole.metadata = optimizer_.state_metadata();
    std::vector<std::size_t> counts(std::size_t(world_size()), 0);  // bytes, from the owner only
    for (std::size_t j = 0; j < params.size(); ++j) {
        if (stepped[j] == 0) continue;
        const auto& [name, p] = params[j];
        const optim::ParamState* st = owns(p) ? optimizer_.state_of(name) : nullptr;
        std::fill(counts.begin(), counts.end(), 0);
        counts[std::size_t(owner(p))] = std::size_t(p.numel()) * sizeof(real);
        for (const std::string& b : buffers) {
            Array received(rank_ == 0 ? p.data().shape() : ArrayShape{0});
            backend::gather_v(st ? st->buffer(b)->data() : nullptr, counts, received.data(), 0);
            if (rank_ == 0) whole.tensors.emplace_back(name + "." + b, from_array(std::move(received)));
        }
        if (rank_ == 0 && counts_steps) whole.metadata[name + ".step"] = std::to_string(std::int64_t(stepped[j]));
    }
    return whole;
}

void ZeroRedundancyOptimizer::load_state_dict(const optim::OptimizerState& state) {
    const char* op = "ZeroRedundancyOptimizer::load_state_dict";
    check_optimizer_parameters(op);
    // This rank's part: the whole state without the other ranks' parameters' buffers and steps.
    std::set<std::string> others;
    for (const auto& [name, p] : optimizer_parameters(optimizer_)) {
        if (owns(p)) continue;
        for (const std::string& b : optimizer_.state_buffer_names()) others.insert(name + "." + b);
        others.insert(name + ".step");
    }
    optim::OptimizerState part;
    for (const auto& [name, t] : state.tensors)
        if (!others.count(name)) part.tensors.emplace_back(name, t);
    for (const auto& [key, value] : state.metadata)
        if (!others.count(key)) part.metadata.emplace(key, value);
    // Each rank checks its own part; the ranks agree before any keeps it.
    const optim::OptimizerState before = optimizer_.state_dict();
    std::string refused;
    try {
        optimizer_.load_state_dict(part);
    } catch (const std::exception& e) {
        refused = e.what();
    }
    const std::vector<std::string> texts = gather_if_different(refused);  // empty: every rank alike
    if (texts.empty()) {
        if (refused.empty()) return;  // every rank loaded its part
        throw ValueError(refused);    // every rank refused alike
    }
    if (refused.empty()) optimizer_.load_state_dict(before);  // loaded here, refused elsewhere: undone
    for (std::size_t q = 0; q < texts.size(); ++q)
        if (!texts[q].empty()) throw ValueError(fmt::format("{}: refused on rank {}: {}", op, q, texts[q]));
}

optim::MemoryReport ZeroRedundancyOptimizer::memory_report() const {
    check_optimizer_parameters("ZeroRedundancyOptimizer::memory_report");
    optim::MemoryReport report = optimizer_.memory_report();
    report.sharded = true;
    report.rank = rank_;
    report.world_size = world_size();
    report.sharding = fmt::format("ZeRO stage {}", stage_);
    const NamedTensors params = optimizer_parameters(optimizer_);  // the report's rows, in order
    std::vector<double> bytes(report.rows.size());
    for (std::size_t j = 0; j < report.rows.size(); ++j) {
        report.rows[j].owner = owner(params[j].second);
        bytes[j] = double(report.rows[j].state_bytes());
    }
    distributed::all_reduce(bytes, ReduceOp::Sum);  // exact: whole numbers below 2^53
    for (std::size_t j = 0; j < report.rows.size(); ++j) report.rows[j].state_bytes_all_ranks = std::size_t(bytes[j]);
    return report;
}

}  // namespace xgrad::distributed
