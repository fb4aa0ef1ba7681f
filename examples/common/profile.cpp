// examples/common/profile.cpp — --profile N: the window of steps, the categories, the picture
// (see profile.hpp).
//
// Legend: self time = an event's duration less its children's (core/profiler.hpp); on the thread
// that runs the loop the self times sum to the profiled wall, so the categories below do too.
#include "common/profile.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/distributed/distributed.hpp>
#include <xgrad/io/atomic_file.hpp>

#include "common/gnuplot.hpp"

namespace examples {

namespace profiler = xgrad::profiler;

std::vector<std::string> profile_files() {
    return {"trace.json", "profile.gp", "profile.png", "profile_time.tsv", "profile_memory.tsv"};
}

void check_profile_window(int n, int start, int end, const std::string& steps_flag) {
    if (n == 0) return;
    if (n < 0) throw std::invalid_argument(fmt::format("--profile {}: the steps to profile are 0 (off) or more", n));
    const std::int64_t needed = std::int64_t(kProfileWarmup) + n;  // 64 bits: any int n fits
    if (std::int64_t(end) - start >= needed) return;
    throw std::invalid_argument(fmt::format(
        "--profile {} profiles steps {}..{} of this run, after {} warm-up steps, but the run takes {} steps ({}..{}): "
        "give {} room for {} steps, or lower --profile", n, std::int64_t(start) + kProfileWarmup + 1, start + needed,
        kProfileWarmup, std::int64_t(end) - start, std::int64_t(start) + 1, end, steps_flag, needed));
}

// ---- categories ------------------------------------------------------------------------------------
namespace {
enum Category { kProducts, kElementwise, kSoftmaxNorms, kEmbeddingLoss, kShapes, kEngine, kOptimizer, kCommunication,
                kBetweenOps, kCategories };

// An op's category by its name, as make_result (and its OpScope) names it.
Category category_of_op(const std::string& op) {
    static const std::array<std::pair<Category, std::vector<std::string>>, 4> kOps{{
        {kProducts, {"matmul", "linear", "lora_linear", "masked_matmul", "sampled_matmul", "fused_causal_attention",
                     "fused_causal_attention_packed", "cached_causal_attention",
                     "tiled_causal_attention", "conv1d", "conv2d", "conv3d"}},
        {kElementwise, {"add", "sub", "mul", "div", "neg", "add_scalar", "mul_scalar", "rdiv_scalar", "rsub_scalar",
                        "pow", "exp", "log", "tanh", "relu", "sigmoid", "gelu", "silu", "sqrt", "rsqrt", "abs",
                        "clamp", "dropout", "where", "masked_fill", "apply_rotary"}},
        {kSoftmaxNorms, {"softmax", "log_softmax", "layer_norm", "rms_norm", "var", "sum", "sum_dim", "max",
                         "max_dim", "cumsum"}},
        {kEmbeddingLoss, {"embedding", "index_select", "gather", "scatter_add", "cross_entropy", "nll_loss",
                          "binary_cross_entropy_with_logits"}},
    }};
    for (const auto& [category, names] : kOps)
        if (std::find(names.begin(), names.end(), op) != names.end()) return category;
    return kShapes;  // reshape, permute, narrow, concat, checkpoint and any op not listed
}

Category category_of(const profiler::Event& e) {
    switch (e.kind) {
        case profiler::Kind::op: return category_of_op(e.name);
        case profiler::Kind::backward: {  // "<op> backward"
            const std::string suffix = " backward";
            const bool has = e.name.size() > suffix.size() && e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0;
            return category_of_op(has ? e.name.substr(0, e.name.size() - suffix.size()) : e.name);
        }
        case profiler::Kind::engine: return kEngine;
        case profiler::Kind::optimizer: return kOptimizer;
        case profiler::Kind::collective: return kCommunication;
        case profiler::Kind::user:
        case profiler::Kind::step: return kBetweenOps;
        case profiler::Kind::worker: break;
    }
    return kCategories;
}
}  // namespace

const std::vector<std::string>& op_categories() {
    static const std::vector<std::string> names{"products", "elementwise", "softmax, norms, reductions",
                                                "embedding, loss", "shapes, copies, other ops", "backward engine",
                                                "optimizer", "communication", "other (between ops)"};
    return names;
}

std::string op_category(const profiler::Event& e) {
    const Category c = category_of(e);
    return c == kCategories ? std::string() : op_categories()[c];
}

std::vector<double> time_by_category(const profiler::Profile& profile) {
    std::vector<double> seconds(kCategories, 0.0);
    std::int64_t in_events = 0;
    for (const profiler::Event& e : profile.events) {
        const Category c = category_of(e);
        if (e.thread != profile.profiling_thread || c == kCategories) continue;
        seconds[c] += double(e.self_ns) * 1e-9;
        in_events += e.self_ns;
    }
    // The wall outside every event (the profiler's own start, before its first step opens).
    seconds[kBetweenOps] += double(std::max<std::int64_t>(profile.wall_ns - in_events, 0)) * 1e-9;
    return seconds;
}

double counted_flops(const profiler::Profile& profile) {
    double flops = 0;
    for (const profiler::Event& e : profile.events) flops += e.flops;
    return flops;
}

// ---- the peak --------------------------------------------------------------------------------------
std::string peak_line(const profiler::Profile& profile) {
    if (profile.memory.empty()) return "no memory samples: nothing was allocated while profiling";
    const profiler::MemorySample& peak = profile.peak();
    std::string where = "outside every event", step;
    for (std::int64_t i = peak.event; i >= 0; i = profile.events[std::size_t(i)].parent) {
        const profiler::Event& e = profile.events[std::size_t(i)];
        if (e.kind == profiler::Kind::step) step = fmt::format(" ({})", e.name);
        else where = i == peak.event ? e.name : where + " in " + e.name;
    }
    return fmt::format("peak {:.2f} MiB live in Arrays, {:.2f} ms into the profile{}, allocated by {}",
                       double(peak.live_bytes) / (1 << 20), double(peak.time_ns) * 1e-6, step, where);
}

// ---- the picture ------------------------------------------------------------------------------------
namespace {
// dir/profile_time.tsv: category, ms per step, % of the step; dir/profile_memory.tsv: ms, MiB.
void write_profile_data(const profiler::Profile& profile, int steps, const std::string& dir) {
    const std::vector<double> seconds = time_by_category(profile);
    const double wall = std::max(double(profile.wall_ns) * 1e-9, 1e-12);
    std::string time = "# category\tms per step\t% of the step\n";
    for (std::size_t c = 0; c < seconds.size(); ++c)
        fmt::format_to(std::back_inserter(time), "{}\t{:.4f}\t{:.2f}\n", op_categories()[c],
                       1e3 * seconds[c] / steps, 100 * seconds[c] / wall);
    xgrad::io::write_file_atomically(dir + "/profile_time.tsv", time, "plot_profile");
    std::string memory = "# ms since the profile began\tMiB live in Arrays\n";
    fmt::format_to(std::back_inserter(memory), "0\t{:.6f}\n", double(profile.live_bytes_at_start) / (1 << 20));
    for (const profiler::MemorySample& m : profile.memory)
        fmt::format_to(std::back_inserter(memory), "{:.6f}\t{:.6f}\n", double(m.time_ns) * 1e-6,
                       double(m.live_bytes) / (1 << 20));
    const std::int64_t last = profile.memory.empty() ? profile.live_bytes_at_start : profile.memory.back().live_bytes;
    fmt::format_to(std::back_inserter(memory), "{:.6f}\t{:.6f}\n", double(profile.wall_ns) * 1e-6,  // to the end:
                   double(last) / (1 << 20));  // an optimizer's step may allocate nothing
    xgrad::io::write_file_atomically(dir + "/profile_memory.tsv", memory, "plot_profile");
}

// The lower panel's marks: a dashed line where each profiled step begins, the peak as a point.
std::string memory_marks(const profiler::Profile& profile) {
    std::string gp;
    for (const profiler::Event& e : profile.events)
        if (e.kind == profiler::Kind::step && e.thread == profile.profiling_thread)
            gp += fmt::format("set arrow from {0:.4f}, graph 0 to {0:.4f}, graph 1 nohead dt 2 lc rgb '#999999'\n",
                              double(e.start_ns) * 1e-6);
    if (profile.memory.empty()) return gp;
    const profiler::MemorySample& peak = profile.peak();
    const std::string by = peak.event >= 0 ? profile.events[std::size_t(peak.event)].name : "no event";
    const bool right_half = 2 * peak.time_ns > profile.wall_ns;  // the label on the side with room
    gp += fmt::format("set label 1 {1} at {2:.4f}, {3:.6f} {0} point pt 7 ps 1.5 lc rgb '#c0392b' offset {4},0.5\n",
                      right_half ? "right" : "left",
                      gnuplot_quote(fmt::format("peak {:.2f} MiB: {}", double(peak.live_bytes) / (1 << 20), by)),
                      double(peak.time_ns) * 1e-6, double(peak.live_bytes) / (1 << 20), right_half ? -1 : 1);
    return gp;
}
}  // namespace

std::string plot_profile(const profiler::Profile& profile, int steps, const std::string& dir) {
    write_profile_data(profile, steps, dir);
    const std::string time = gnuplot_quote(dir + "/profile_time.tsv");
    std::string gp = "set terminal pngcairo size 1000,900 noenhanced\n";
    gp += "set output " + gnuplot_quote(dir + "/profile.png") + "\n";
    gp += fmt::format("set multiplot layout 2,1 title {}\n",
                      gnuplot_quote(fmt::format("{} profiled steps: where a step's time goes, and the bytes it holds", steps)));
    gp += "set datafile separator '\\t'\nset style fill solid 0.8 border -1\nset boxwidth 0.7\nset grid ytics\n"
          "set ylabel 'ms per step'\nset yrange [0:*]\nset offsets 0, 0, graph 0.12, 0\nset xtics rotate by -20\n"
          "set lmargin 12\nset rmargin 10\n";
    gp += "plot " + time + " using 0:2:xtic(1) with boxes lc rgb '#2c5d9f' notitle, \\\n     " + time +
          " using 0:2:(sprintf('%.1f%%', $3)) with labels offset 0,0.8 notitle\n";
    gp += fmt::format("set xtics norotate\nset offsets 0, 0, graph 0.1, 0\nset yrange [*:*]\nset xrange [0:{:.4f}]\n",
                      double(profile.wall_ns) * 1e-6);
    gp += "set grid xtics ytics\nset xlabel 'ms since the profile began (dashed: a step begins)'\n"
          "set ylabel 'MiB live in Arrays'\n";
    gp += memory_marks(profile);
    gp += "plot " + gnuplot_quote(dir + "/profile_memory.tsv") + " using 1:2 with steps lc rgb '#c0392b' notitle\n";
    gp += "unset multiplot\n";
    return run_gnuplot(dir + "/profile.gp", gp, dir + "/profile.png", "profile picture");
}

// ---- the report ------------------------------------------------------------------------------------
std::string report_profile(const profiler::Profile& profile, int steps, const std::string& dir) {
    std::string out = profiler::table(profiler::key_averages(profile), profile);
    const std::vector<double> seconds = time_by_category(profile);
    const double wall = std::max(double(profile.wall_ns) * 1e-9, 1e-12);
    out += fmt::format("\ntime per step by category ({} steps, {:.2f} ms a step):\n", steps, 1e3 * wall / steps);
    for (std::size_t c = 0; c < seconds.size(); ++c)
        out += fmt::format("  {:<28} {:>9.3f} ms {:>6.1f}%\n", op_categories()[c], 1e3 * seconds[c] / steps,
                           100 * seconds[c] / wall);
    const double flops = counted_flops(profile);
    out += fmt::format("counted FLOPs {:.6f} GFLOP per step (products 2·M·N·K, elementwise ops one a value)\n",
                       flops / steps / 1e9);
    out += fmt::format("FLOP rate {:.2f} GFLOP/s: the counted FLOPs over the profiled wall\n", flops / wall / 1e9);
    out += peak_line(profile) + "\n";
    fmt::print("{}", out);
    profiler::export_chrome_trace(profile, dir + "/trace.json");
    fmt::print("trace (Perfetto, chrome://tracing): {}/trace.json\n", dir);
    fmt::print("{}\n", plot_profile(profile, steps, dir));
    return out;
}

// ---- the window of steps ---------------------------------------------------------------------------
StepProfile::StepProfile(int n, int start, int end, std::string out_dir, const std::string& steps_flag)
    : n_(n), first_(start + kProfileWarmup), out_(std::move(out_dir)) {
    check_profile_window(n, start, end, steps_flag);
}

void StepProfile::begin_step(int step) {
    if (n_ > 0 && step == first_) profiler_ = std::make_unique<profiler::Profiler>();
}

void StepProfile::end_step(int step) {
    if (!profiler_ || step < first_) return;
    if (step < first_ + n_ - 1) {
        profiler_->step();
        return;
    }
    const profiler::Profile& p = profiler_->stop();
    if (xgrad::distributed::rank() == 0) {
        fmt::print("\nprofile of steps {}..{} (after {} warm-up steps of this run), self time first:\n", first_ + 1,
                   first_ + n_, kProfileWarmup);
        report_profile(p, n_, out_);
    }
    profiler_.reset();
}

}  // namespace examples
