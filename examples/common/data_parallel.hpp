// examples/common/data_parallel.hpp — what char_mlp and gpt share to train on W processes at once
// (mpirun -np W): the batch rule and its slicing, rank 0 alone on stdout, the checks that every
// rank runs the same configuration, and the loss averaged over the ranks.
//
// Legend: B global batch (--batch-size), W ranks, r this rank, N micro-steps per optimizer step
// (--grad-accum, nanoGPT's gradient_accumulation_steps), b = B/(W·N) rows per rank and micro-step.
//
// Every rank draws the same B rows from the same batch_rng, as one process does; micro-step k of
// rank r takes the rows [k·B/N + r·b, k·B/N + (r+1)·b). Every row is used once and every piece has
// b rows, so the mean of the W·N piece losses is the mean over B; W·N must divide B.
// examples/gpt/README.md, "Several processes (MPI)", has the rule with examples and its argument.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>

#include <xgrad/core/tensor.hpp>
#include <xgrad/distributed/ddp.hpp>
#include <xgrad/distributed/zero.hpp>

#include "common/checkpoint.hpp"  // RunFlags, train::TextFingerprint

namespace examples {

// ---- the batch rule ------------------------------------------------------------------------------
struct BatchSplit {
    int global = 1;  // B
    int world = 1;   // W
    int accum = 1;   // N
    int rank = 0;    // r

    int per_rank() const { return global / (world * accum); }  // b = B/(W·N)
    // The rows [begin, end) of the global batch that this rank uses in micro-step k (above).
    std::pair<std::int64_t, std::int64_t> rows(int k) const;
};

// The split of B rows for this process (distributed::rank(), world_size()) into N micro-steps.
// Throws std::invalid_argument naming --batch-size B, the W ranks and --grad-accum N unless W·N
// divides B. Call it before any data is read.
BatchSplit split_batch(int batch_size, int grad_accum);

// Rows [begin, end) along the first axis of t (B, ...) → (end − begin, ...); t itself when the
// range is all of it. Throws ValueError for a range outside [0, B].
xgrad::IndexTensor take_rows(const xgrad::IndexTensor& t, std::int64_t begin, std::int64_t end);

// This rank's part of micro-step k of a global batch {x (B, ...), y (B, ...)}: {x (b, ...), y (b, ...)}.
template <class Batch>
Batch micro_batch(const Batch& global, const BatchSplit& split, int k) {
    const auto [begin, end] = split.rows(k);
    return Batch{take_rows(global.x, begin, end), take_rows(global.y, begin, end)};
}

// The run's first line under mpirun or with --grad-accum above 1, e.g.
//   world  2 ranks (Open MPI v4.1.4), 1 thread each: global batch 12 = 2 ranks × 6 windows × grad-accum 1
//   world  1 process (not started by mpirun), 1 thread: global batch 12 = 1 rank × 6 windows × grad-accum 2
// `rows` names what a row is ("windows", "examples").
std::string world_line(const BatchSplit& split, int threads, const std::string& rows);

// ---- one voice -----------------------------------------------------------------------------------
// On ranks 1..W−1, stdout becomes /dev/null (at the file descriptor, so printf, fmt::print and
// std::cout alike); stderr stays, so every rank's errors are seen. Rank 0 prints, and it alone
// writes files. Call it first in main, after distributed::init.
void print_on_rank_0_only();

// ---- the ranks agree -----------------------------------------------------------------------------
// Throws the same ValueError on every rank ("flags and data: rank 1 differs from rank 0: line 12 is
// '--lr 0.002' on rank 1 and '--lr 0.001' on rank 0", distributed::check_same_on_all_ranks) unless
// every rank was started with the same `flags` (one line each, in name order) and read the same data (the last
// line, and one more naming the tokenizer when data.tokenizer is set). Collective. With W = 1 it
// returns at once.
void check_same_run(const RunFlags& flags, const xgrad::train::TextFingerprint& data);
// The same for the state a run starts from (the step, and batch_rng after a --resume): a rank
// that resumed from another checkpoint than rank 0 would take another number of steps.
void check_same_start(int step, const std::mt19937_64& batch_rng);
// The same with the batch sampler's state (data::WindowSampler::state_dict).
void check_same_start(int step, const std::map<std::string, std::string>& sampler_state);

// ---- what the all-reduce costs --------------------------------------------------------------------
// Times each training step and the gradient all-reduce inside it (DistributedDataParallel's
// last_sync()), for the line printed after training on W > 1 ranks (bench/compare.py's T4 reads it):
//   data parallel    gradient all-reduce 2.31 ms per step (9.5% of a step), 3243520 bytes from each rank per step
// Under ZeRO (ZeroRedundancyOptimizer's last_step()) it times the reduce-scatter, the sharded
// optimizer step and the all-gather together, as last_step().seconds does:
//   data parallel    ZeRO reduce-scatter, sharded step and all-gather 2.50 ms per step (10.1% of a step), ...
class SyncTimer {
public:
    void start_step();                                               // before the step's first forward
    void end_step(const xgrad::distributed::SyncStats& last_sync);  // after opt.step()
    void end_step(const xgrad::distributed::ZeroStats& last_step);  // after zero.step()
    std::string line() const;  // "" with one rank or before any step

private:
    void add(double seconds, std::size_t bytes);
    int steps_ = 0;
    double step_start_ = 0, step_seconds_ = 0, sync_seconds_ = 0;  // s
    std::size_t bytes_ = 0;
    std::string what_ = "gradient all-reduce";  // the collectives timed
};

// The mean of `value` over the ranks (an all-reduce of one double; `value` itself when W = 1).
// Collective: every rank calls it at the same step.
double mean_over_ranks(double value);

}  // namespace examples
