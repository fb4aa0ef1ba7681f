// core/profiler_report.cpp — reading a profile: key_averages, the table, the Chrome trace.
//
// Legend: self time = an event's duration less its children's; wall = the profiler's run, start
// to stop. On the thread that started the profiler, the self times of its events sum to the wall
// (the step events hold what ran between ops); a pool worker's events run beside them.
#include <xgrad/core/profiler.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace xgrad::profiler {

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::op: return "op";
        case Kind::backward: return "backward";
        case Kind::engine: return "engine";
        case Kind::optimizer: return "optimizer";
        case Kind::collective: return "collective";
        case Kind::user: return "user";
        case Kind::step: return "step";
        case Kind::worker: return "worker";
    }
    return "?";
}

const char* lane_name(Lane l) {
    switch (l) {
        case Lane::step: return "step";
        case Lane::forward: return "forward";
        case Lane::backward: return "backward";
        case Lane::optimizer: return "optimizer";
    }
    return "?";
}

double OpStats::gflops_per_s() const { return flops > 0 && self_ns > 0 ? flops / double(self_ns) : 0.0; }

// ---- key_averages ---------------------------------------------------------------------------------
std::vector<OpStats> key_averages(const Profile& profile, bool group_by_input_shape) {
    std::map<std::tuple<std::string, std::string, Kind>, OpStats> groups;  // a region named as an op stays apart
    for (const Event& e : profile.events) {
        if (e.kind == Kind::step) continue;
        const bool worker = e.kind == Kind::worker;
        OpStats& row = groups[{e.name, group_by_input_shape ? e.shapes : std::string(), e.kind}];
        if (row.calls == 0) {
            row.name = e.name;
            row.shapes = group_by_input_shape ? e.shapes : std::string();
            row.kind = e.kind;
            row.worker = worker;
        }
        row.calls += 1;
        row.self_ns += e.self_ns;
        row.total_ns += e.duration_ns;
        row.flops += e.flops;
        row.bytes_allocated += e.bytes_allocated;
        row.bytes_sent += e.bytes_sent;
    }
    std::vector<OpStats> rows;
    rows.reserve(groups.size());
    for (auto& [key, row] : groups) rows.push_back(std::move(row));
    std::stable_sort(rows.begin(), rows.end(), [](const OpStats& a, const OpStats& b) { return a.self_ns > b.self_ns; });
    return rows;
}

// ---- the table --------------------------------------------------------------------------------------
namespace {
// At most `width` bytes: a longer name keeps its first whole UTF-8 characters and "...".
std::string cut(const std::string& s, std::size_t width) {
    if (s.size() <= width) return s;
    std::size_t n = width - 3;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // 10xxxxxx: inside a character
    return s.substr(0, n) + "...";
}
}  // namespace

std::string table(const std::vector<OpStats>& rows, const Profile& profile, std::size_t row_limit) {
    const double wall = double(profile.wall_ns) * 1e-9;
    const auto pct = [&](std::int64_t ns) { return profile.wall_ns > 0 ? 100.0 * double(ns) / double(profile.wall_ns) : 0.0; };
    const bool shapes = std::any_of(rows.begin(), rows.end(), [](const OpStats& r) { return !r.shapes.empty(); });
    const std::size_t n = row_limit == 0 ? rows.size() : std::min(row_limit, rows.size());
    std::size_t w = 20;  // the name column: the longest name shown, at most 48 characters
    for (std::size_t i = 0; i < n; ++i) w = std::max(w, rows[i].name.size() + (rows[i].worker ? 9 : 0));
    w = std::min<std::size_t>(w, 48);
    std::string out = fmt::format("{:<{}} {:>7} {:>10} {:>7} {:>10} {:>9} {:>10}{}\n", "name", w, "calls", "self s",
                                  "self %", "total s", "GFLOP/s", "alloc MiB", shapes ? "  input shapes" : "");
    for (std::size_t i = 0; i < n; ++i) {
        const OpStats& r = rows[i];
        const std::string name = r.worker ? r.name + " [worker]" : r.name;
        const double g = r.gflops_per_s();
        out += fmt::format("{:<{}} {:>7} {:>10.6f} {:>6.1f}% {:>10.6f} {:>9} {:>10.2f}{}\n", cut(name, w), w, r.calls,
                           double(r.self_ns) * 1e-9, pct(r.self_ns), double(r.total_ns) * 1e-9,
                           g > 0 ? fmt::format("{:.2f}", g) : std::string("-"),
                           double(r.bytes_allocated) / (1 << 20), r.shapes.empty() ? "" : "  " + r.shapes);
    }
    std::int64_t between = 0, rest = 0;  // on the profiling thread: the steps' own time; rows not listed
    for (const Event& e : profile.events)
        if (e.thread == profile.profiling_thread && e.kind == Kind::step) between += e.self_ns;
    for (std::size_t i = n; i < rows.size(); ++i)
        if (!rows[i].worker) rest += rows[i].self_ns;
    if (rest > 0)
        out += fmt::format("{:<{}} {:>7} {:>10.6f} {:>6.1f}%\n", fmt::format("({} more rows)", rows.size() - n), w, "",
                           double(rest) * 1e-9, pct(rest));
    out += fmt::format("{:<{}} {:>7} {:>10.6f} {:>6.1f}%\n", "other (between ops)", w, "", double(between) * 1e-9, pct(between));
    out += fmt::format("{:<{}} {:>7} {:>10.6f} {:>6.1f}%   (the profiling thread's self times sum to it; rows add every thread's)\n", "profiled wall", w,
                       "", wall, 100.0);
    return out;
}

// ---- the Chrome trace ---------------------------------------------------------------------------------
// One tid per (thread, lane): tid = 4·thread + lane, so that Perfetto shows a thread's forward,
// backward and optimizer work in lanes of their own, each properly nested.
std::string chrome_trace_json(const Profile& profile) {
    using nlohmann::json;
    json events = json::array();
    const auto tid = [](int thread, Lane lane) { return 4 * thread + int(lane); };
    for (std::size_t t = 0; t < profile.thread_names.size(); ++t)
        for (Lane lane : {Lane::step, Lane::forward, Lane::backward, Lane::optimizer}) {
            events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid(int(t), lane)},
                              {"args", {{"name", profile.thread_names[t] + " · " + lane_name(lane)}}}});
            events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", tid(int(t), lane)},
                              {"args", {{"sort_index", tid(int(t), lane)}}}});
        }
    for (const Event& e : profile.events) {
        json args = {{"self_us", double(e.self_ns) * 1e-3}};
        if (!e.shapes.empty()) args["input shapes"] = e.shapes;
        if (e.flops > 0) args["flops"] = e.flops;
        if (e.bytes_allocated > 0) args["bytes allocated"] = e.bytes_allocated;
        if (e.bytes_sent > 0) args["bytes sent"] = e.bytes_sent;
        events.push_back({{"name", e.name}, {"cat", kind_name(e.kind)}, {"ph", "X"}, {"pid", 0},
                          {"tid", tid(e.thread, e.lane)}, {"ts", double(e.start_ns) * 1e-3},
                          {"dur", double(e.duration_ns) * 1e-3}, {"args", std::move(args)}});
    }
    for (const MemorySample& m : profile.memory)
        events.push_back({{"name", "live bytes"}, {"ph", "C"}, {"pid", 0}, {"ts", double(m.time_ns) * 1e-3},
                          {"args", {{"bytes", m.live_bytes}}}});
    // Names are the caller's bytes: any that are not UTF-8 are written as U+FFFD, as JSON needs.
    return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

void export_chrome_trace(const Profile& profile, const std::string& path) {
    const std::string text = chrome_trace_json(profile);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error("export_chrome_trace: cannot write '" + path + "'");
}

}  // namespace xgrad::profiler
