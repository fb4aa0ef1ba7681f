// data/sampler.hpp — token ids → training windows: x (B, T) and y (B, T), y one token ahead.
//
// Legend: N tokens, V vocabulary, B global batch (windows per optimizer step), T block (tokens of
// context), W ranks, r this rank, A micro-steps per optimizer step (gradient accumulation),
// b = B/(W·A) windows per rank and micro-step.
//
//   tokens (N,) ──offsets o_0..o_{B−1} ~ U{0, …, N − T − 1}──▶ x[i] = tokens[o_i : o_i + T]
//                                                               y[i] = tokens[o_i + 1 : o_i + T + 1]
// One window of T + 1 tokens gives T next-token predictions (y[i, t] follows x[i, 0..t]).
// W ranks × A micro-steps: every rank draws the same B offsets; micro-step k of rank r takes rows
//     [k·B/A + r·b, k·B/A + (r+1)·b)
// so every row is used once (examples/gpt/README.md, "Several processes (MPI)", has the argument).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/data/shards.hpp>  // TokenView

namespace xgrad::data {

// A batch of windows: x (B, T) and y (B, T) int64, y one token ahead of x.
struct Batch {
    IndexTensor x, y;
};

// ---- windows at given offsets ----------------------------------------------------------------------
// The windows starting at `offsets` (each in [0, N − T − 1]): x (B, T), y (B, T) with B = |offsets|.
// Throws ValueError naming "windows" for T < 1; IndexError naming "windows", the offset, T and N
// for an offset past N − T − 1.
Batch windows(TokenView tokens, const std::vector<std::size_t>& offsets, int block);

// B offsets drawn uniformly from [0, N − T − 1], in order: one
// std::uniform_int_distribution<std::size_t>(0, N − T − 1) on `rng`, drawn B times. Throws
// ValueError naming "sample_offsets" when N < T + 1 (no window fits) or B < 1.
std::vector<std::size_t> sample_offsets(std::size_t n_tokens, int batch, int block, std::mt19937_64& rng);
// windows(tokens, sample_offsets(N, B, T, rng), T): B random windows on a caller's rng.
Batch sample_windows(TokenView tokens, int batch, int block, std::mt19937_64& rng);

// A fixed evaluation set: n evenly spaced windows, o_j = ⌊j · (N − T − 1) / n⌋ for j = 0..n−1.
// The same every evaluation, and reproducible outside xgrad from N, T and n alone. Throws
// ValueError naming "fixed_offsets" for T < 1 or N < T + 1.
std::vector<std::size_t> fixed_offsets(std::size_t n_tokens, int block, std::size_t n);
Batch fixed_windows(TokenView tokens, std::size_t n, int block);  // windows at fixed_offsets(N, T, n)

// The rows [begin, end) of a global batch of B that rank r of W takes in micro-step k of A:
// [k·B/A + r·b, k·B/A + (r+1)·b), b = B/(W·A). Throws ValueError naming "micro_batch_rows" and
// the five values unless W, A ≥ 1, r in [0, W), k in [0, A) and W·A divides B.
std::pair<std::int64_t, std::int64_t> micro_batch_rows(int batch, int world_size, int grad_accum, int rank, int k);

// ---- the sampler of a training run -----------------------------------------------------------------
// Options as LibTorch's: WindowSamplerOptions(/*batch=*/12, /*block=*/64).seed(1337).rank(r).world_size(W).grad_accum(A)
class WindowSamplerOptions {
public:
    WindowSamplerOptions(int batch, int block) : batch_(batch), block_(block) {}

    WindowSamplerOptions& seed(std::uint64_t v) { seed_ = v; return *this; }
    WindowSamplerOptions& rank(int v) { rank_ = v; return *this; }
    WindowSamplerOptions& world_size(int v) { world_size_ = v; return *this; }
    WindowSamplerOptions& grad_accum(int v) { grad_accum_ = v; return *this; }

    int batch() const { return batch_; }                // B, windows per optimizer step over all ranks
    int block() const { return block_; }                // T, tokens of context per window
    std::uint64_t seed() const { return seed_; }        // of the std::mt19937_64 (0)
    int rank() const { return rank_; }                  // r in [0, W) (0)
    int world_size() const { return world_size_; }      // W (1)
    int grad_accum() const { return grad_accum_; }      // A, micro-steps per optimizer step (1)
    int per_rank() const {  // b = B/(W·A); 0 for a W or A below 1 (the sampler refuses them)
        const std::int64_t wa = std::int64_t(world_size_) * grad_accum_;
        return wa < 1 ? 0 : int(batch_ / wa);
    }

private:
    int batch_, block_;
    std::uint64_t seed_ = 0;
    int rank_ = 0, world_size_ = 1, grad_accum_ = 1;
};

// Random windows of a token span for one rank: next() draws the global batch's B offsets (all of
// them, on every rank, so the ranks stay in step) and copies only this rank's rows, as A
// micro-batches of b windows. Every piece has b rows, so the mean of the W·A piece losses is the
// mean over the B windows.
// In PyTorch's words: rank and world_size are DistributedSampler's rank and num_replicas; there is
// no set_epoch, since windows are drawn with replacement: a new seed gives a new sequence.
//   data::TokenShard train("train.bin", V);
//   data::WindowSampler sampler(train.view(), data::WindowSamplerOptions(12, 64).seed(1337));
//   for (const data::Batch& mb : sampler.next()) { ... mb.x (b, T), mb.y (b, T) ... }
class WindowSampler {
public:
    // `tokens` must outlive the sampler (a TokenShard's view, or a vector of ids). Throws
    // ValueError naming "WindowSampler" and the value for B, T, W or A below 1, r outside [0, W),
    // W·A not dividing B, or N < T + 1.
    WindowSampler(TokenView tokens, WindowSamplerOptions options);

    // The next optimizer step's windows for this rank: A micro-batches {x (b, T), y (b, T)} int64.
    std::vector<Batch> next();
    // next() of a run with one rank and no accumulation (W·A = 1): the step's one batch
    // {x (B, T), y (B, T)}. Throws ValueError naming "WindowSampler::next_batch" otherwise.
    Batch next_batch();
    // The global batch's B offsets of the next step, drawn as next() draws them (the rng advances).
    std::vector<std::size_t> next_offsets();

    std::int64_t batches_drawn() const { return batches_; }  // optimizer steps drawn so far
    const WindowSamplerOptions& options() const { return options_; }

    // {"rng": the std::mt19937_64 state as operator<< writes it, "batches": the steps drawn, in
    // decimal}. A sampler loaded from it continues with the same batches.
    std::map<std::string, std::string> state_dict() const;
    // Throws ValueError naming "WindowSampler::load_state_dict" and the key for a missing or
    // unknown key, an rng text that does not read back to exactly itself, or a count that is not
    // a decimal integer ≥ 0; the sampler is then unchanged.
    void load_state_dict(const std::map<std::string, std::string>& state);

private:
    TokenView tokens_;
    WindowSamplerOptions options_;
    std::mt19937_64 rng_;
    std::int64_t batches_ = 0;
};

}  // namespace xgrad::data
