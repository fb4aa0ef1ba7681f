// examples/common/profile.hpp — the examples' --profile N: a few steps of a run through
// profiler::Profiler (core/profiler.hpp), then the table, trace.json and profile.png.
//
//   examples::StepProfile profile(cfg.profile, start, end, cfg.out);  // steps start+5 .. start+4+N
//   for (int step = start; step < end; ++step) {
//       profile.begin_step(step);   // the window's first step: the profiler starts
//       ... one training step ...
//       profile.end_step(step);     // prof.step(); after the window's last: stop, print, write
//   }
// The first kProfileWarmup steps of a run are left out: they fill the allocator's free lists and
// the matrix kernels' caches, which no later step pays again. Every rank profiles; rank 0 alone
// prints and writes. The files, in --out: trace.json (Perfetto, chrome://tracing), profile.png
// and the script and data it is drawn from (profile.gp, profile_time.tsv, profile_memory.tsv).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <xgrad/core/profiler.hpp>

namespace examples {

constexpr int kProfileWarmup = 5;  // steps of a run before the profiled ones

// The files --profile writes into --out, for check_output_files.
std::vector<std::string> profile_files();

// Throws std::invalid_argument, naming --profile and `steps_flag`, unless the run's steps
// [start, end) hold the warm-up and the N profiled steps, and when n < 0. n = 0 (no profile)
// always passes.
void check_profile_window(int n, int start, int end, const std::string& steps_flag);

// ---- reading a profile by op category ------------------------------------------------------------
// The categories of the picture, in its order: "products" (matmul, linear, lora_linear, the
// attention kernels, forward and backward), "elementwise", "softmax, norms, reductions",
// "embedding, loss", "shapes, copies, other ops", "backward engine" (the graph walk and
// accumulate_grad), "optimizer" (step, zero_grad, clipping), "communication" (collectives),
// "other (between ops)" (the self time of the steps and the user scopes: code outside any op;
// and the wall outside every event, the profiler's own start).
const std::vector<std::string>& op_categories();

// The category of one event: an op or its backward closure by the op's name, the rest by kind.
// A pool worker's event has none (""): it runs beside its caller, not in the step's time.
std::string op_category(const xgrad::profiler::Event& e);

// Seconds of the profiling thread's self time in each category, in op_categories()'s order;
// they sum to the profile's wall.
std::vector<double> time_by_category(const xgrad::profiler::Profile& profile);

// FLOPs counted in every event of the profile (products 2·M·N·K, elementwise ops one a value).
double counted_flops(const xgrad::profiler::Profile& profile);

// "peak 12.3 MiB live in Arrays, 8.41 ms into the profile (ProfilerStep#1), allocated by gelu in
// block 3 in forward + loss", or a line saying no memory was sampled.
std::string peak_line(const xgrad::profiler::Profile& profile);

// The table (key_averages), the time by category per step, the FLOPs, the peak; then
// dir/trace.json and dir/profile.png. Returns the lines printed before the file notes.
// Throws std::runtime_error naming a file that cannot be written (gnuplot missing: a note).
std::string report_profile(const xgrad::profiler::Profile& profile, int steps, const std::string& dir);

// Draws dir/profile.png: the time per step by category as bars, and the live bytes over the
// profiled steps with the peak marked. Returns run_gnuplot's note (gnuplot.hpp).
std::string plot_profile(const xgrad::profiler::Profile& profile, int steps, const std::string& dir);

// ---- the window of steps ---------------------------------------------------------------------------
class StepProfile {
public:
    // Profiles steps start + kProfileWarmup .. start + kProfileWarmup + n - 1 of a loop over
    // [start, end); n = 0: off, every call does nothing. check_profile_window's errors.
    StepProfile(int n, int start, int end, std::string out_dir, const std::string& steps_flag = "--steps");
    void begin_step(int step);  // the window's first step starts the profiler
    void end_step(int step);    // Profiler::step() inside the window; its last stops and reports (rank 0)

private:
    int n_ = 0, first_ = 0;
    std::string out_;
    std::unique_ptr<xgrad::profiler::Profiler> profiler_;
};

}  // namespace examples
