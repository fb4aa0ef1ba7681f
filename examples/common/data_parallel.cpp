// examples/common/data_parallel.cpp — the batch rule, rank 0's stdout, the ranks' agreement
// (see data_parallel.hpp for the index arithmetic).
#include "common/data_parallel.hpp"

#include <xgrad/data/sampler.hpp>  // micro_batch_rows

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/distributed/distributed.hpp>

#include "common/run_log.hpp"  // now_seconds

namespace examples {

namespace dist = xgrad::distributed;

std::pair<std::int64_t, std::int64_t> BatchSplit::rows(int k) const {
    return xgrad::data::micro_batch_rows(global, world, accum, rank, k);  // [k·B/N + r·b, k·B/N + (r+1)·b)
}

BatchSplit split_batch(int batch_size, int grad_accum) {
    const int W = dist::world_size();
    if (grad_accum < 1 || batch_size % (std::int64_t(W) * grad_accum) != 0)
        throw std::invalid_argument(fmt::format(
            "--batch-size {} is not divisible by {} rank{} × --grad-accum {} = {}: every rank takes the same "
            "number of rows, --batch-size / (ranks × --grad-accum), in each micro-step",
            batch_size, W, W == 1 ? "" : "s", grad_accum, std::int64_t(W) * grad_accum));
    return BatchSplit{batch_size, W, grad_accum, dist::rank()};
}

xgrad::IndexTensor take_rows(const xgrad::IndexTensor& t, std::int64_t begin, std::int64_t end) {
    const std::int64_t B = t.dim() == 0 ? 0 : t.size(0);
    xgrad::check(0 <= begin && begin <= end && end <= B, "take_rows", "rows [{}, {}) are outside [0, {}]", begin, end, B);
    if (begin == 0 && end == B) return t;
    const std::int64_t row = B == 0 ? 0 : t.numel() / B;  // elements per row, row-major
    const std::int64_t* first = t.data().data() + begin * row;
    xgrad::Shape shape = t.shape();
    shape[0] = end - begin;
    return xgrad::IndexTensor(std::vector<std::int64_t>(first, first + (end - begin) * row), shape);
}

std::string world_line(const BatchSplit& s, int threads, const std::string& rows) {
    // describe() is "rank r of W (Open MPI v4.1.4)" under mpirun, "1 process (not started by mpirun)" alone.
    std::string world = dist::describe();
    if (world.rfind("rank ", 0) == 0) {
        const std::size_t paren = world.find(" (");
        world = fmt::format("{} rank{}{}", s.world, s.world == 1 ? "" : "s",
                            paren == std::string::npos ? "" : world.substr(paren));
    }
    return fmt::format("world  {}, {} thread{}{}: global batch {} = {} rank{} × {} {} × grad-accum {}", world, threads,
                       threads == 1 ? "" : "s", s.world == 1 ? "" : " each", s.global, s.world, s.world == 1 ? "" : "s",
                       s.per_rank(), rows, s.accum);
}

void print_on_rank_0_only() {
    if (dist::rank() == 0) return;
    std::fflush(stdout);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0) throw std::runtime_error("cannot open /dev/null for the stdout of a rank other than 0");
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
}

void check_same_run(const RunFlags& flags, const xgrad::train::TextFingerprint& data) {
    std::string text;
    for (const auto& [name, value] : flags) text += name + " " + value + "\n";
    text += fmt::format("data {} bytes, FNV-1a {:016x}, vocabulary {}\n", data.text_bytes, data.text_fnv1a, data.vocab);
    if (!data.tokenizer.empty()) text += "tokenizer " + data.tokenizer + "\n";
    dist::check_same_on_all_ranks("flags and data", text);  // parse_and_run's error line names the program
}

void check_same_start(int step, const std::mt19937_64& batch_rng) {
    check_same_start(step, {{"batch_rng", xgrad::generator_text(batch_rng)}});
}

void check_same_start(int step, const std::map<std::string, std::string>& sampler_state) {
    std::string state = "step " + std::to_string(step);
    for (const auto& [key, value] : sampler_state) state += "\n" + key + " " + value;
    dist::check_same_on_all_ranks("the step and batch sampler to start from (--resume)", state);
}

void SyncTimer::start_step() { step_start_ = now_seconds(); }

void SyncTimer::add(double seconds, std::size_t bytes) {
    step_seconds_ += now_seconds() - step_start_;
    sync_seconds_ += seconds;
    bytes_ = bytes;
    ++steps_;
}

void SyncTimer::end_step(const xgrad::distributed::SyncStats& last_sync) { add(last_sync.seconds, last_sync.dense_bytes); }

void SyncTimer::end_step(const xgrad::distributed::ZeroStats& last_step) {
    what_ = "ZeRO reduce-scatter, sharded step and all-gather";
    add(last_step.seconds, last_step.reduced_bytes);  // the gradient bytes, as DDP's dense_bytes
}

std::string SyncTimer::line() const {
    if (dist::world_size() == 1 || steps_ == 0) return "";
    return fmt::format("data parallel    {} {:.2f} ms per step ({:.1f}% of a step), {} bytes from "
                       "each rank per step",
                       what_, 1e3 * sync_seconds_ / steps_, 100 * sync_seconds_ / step_seconds_, bytes_);
}

double mean_over_ranks(double value) {
    std::vector<double> v{value};
    dist::all_reduce(v, dist::ReduceOp::Mean);
    return v[0];
}

}  // namespace examples
