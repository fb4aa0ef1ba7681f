// core/profiler.hpp — where a step's time and memory go, recorded by the engine itself; as
// torch.profiler (https://pytorch.org/docs/stable/profiler.html). examples/gpt/README.md, "What the
// profiler records", explains the events, self time, FLOPs and the memory timeline.
//
//   profiler::Profiler prof;                       // records from here; "ProfilerStep#0" opens
//   for (int s = 0; s < 3; ++s) {
//       opt.zero_grad(); loss_of(model, batch).backward(); opt.step();
//       prof.step();                               // closes step s, opens s + 1
//   }
//   const profiler::Profile& p = prof.stop();
//   fmt::print("{}", profiler::table(profiler::key_averages(p), p));
//   profiler::export_chrome_trace(p, "trace.json");   // Perfetto, chrome://tracing
//
// Units: nanoseconds in Event, seconds in the table, microseconds in the trace; bytes; FLOPs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/core/profiler_hooks.hpp>
#include <xgrad/core/tensor.hpp>

namespace xgrad::profiler {

// ---- what is recorded ------------------------------------------------------------------------
enum class Kind { op, backward, engine, optimizer, collective, user, step, worker };
// The trace's lanes per thread: the phase an event began in (an op under loss.backward() is in
// the backward lane, one under an optimizer's step in the optimizer lane).
enum class Lane { step, forward, backward, optimizer };

const char* kind_name(Kind k);  // "op", "backward", ...
const char* lane_name(Lane l);  // "step", "forward", "backward", "optimizer"

struct Event {
    std::string name;             // "matmul", "matmul backward", "block 3", "ProfilerStep#0"
    Kind kind = Kind::user;
    Lane lane = Lane::forward;
    int thread = 0;               // 0, 1, ... in the order threads first recorded
    std::string shapes;           // the inputs' shapes, "(4, 64, 128), (128, 384)" (record_shapes)
    std::int64_t start_ns = 0;    // from the profiler's start
    std::int64_t duration_ns = 0;
    std::int64_t self_ns = 0;     // duration_ns less the children's durations
    std::int64_t parent = -1;     // index in Profile::events of the enclosing event, -1 for none
    int depth = 0;                // 0 for a root, parent's depth + 1 otherwise
    double flops = 0;             // counted while this was its thread's innermost event
    std::uint64_t bytes_allocated = 0;  // Array bytes allocated while it was the innermost event
    std::uint64_t bytes_sent = 0;       // a collective's payload, bytes
};

// Bytes live in Arrays right after an allocation or a free, while the profiler ran.
struct MemorySample {
    std::int64_t time_ns = 0;
    std::int64_t live_bytes = 0;
    std::int64_t event = -1;  // the innermost event of the thread that allocated or freed, or -1
};

struct Profile {
    std::vector<Event> events;                // by thread, then start time; parents before children
    std::vector<MemorySample> memory;         // in time order
    std::vector<std::string> thread_names;    // "main", "pool worker 1", ...: index = Event::thread
    std::int64_t wall_ns = 0;                 // from start to stop
    std::int64_t live_bytes_at_start = 0;     // memory_allocated() when the profiler started
    int profiling_thread = 0;                 // the thread that started it

    // The sample of most live bytes (the first, of equals); throws ValueError when there is none.
    const MemorySample& peak() const;
};

namespace detail {  // the engine's hooks that need names (core/profiler_hooks.hpp has the rest)
Handle begin(const std::string& name, Kind kind);             // an event on this thread; end_event ends it
void note_result(const char* name, std::size_t elements);      // make_result: an elementwise op's FLOPs
std::string innermost_name();                                  // this thread's innermost event, or ""
Lane lane();                                                    // this thread's lane (LaneGuard sets it)
// Ends its event when it goes: `detail::Scope s(active() ? begin(name + " backward", ...) : Handle{});`
struct Scope {
    Handle handle;
    ~Scope() { end_event(handle); }
};
}  // namespace detail

// ---- recording ---------------------------------------------------------------------------------
class Options {
public:
    // Each op's input shapes into Event::shapes (a string per op: costs a little more).
    Options& record_shapes(bool v) { record_shapes_ = v; return *this; }
    // Sample live bytes at every allocation and free for the timeline (bytes per event are kept either way).
    Options& profile_memory(bool v) { profile_memory_ = v; return *this; }
    bool record_shapes() const { return record_shapes_; }
    bool profile_memory() const { return profile_memory_; }

private:
    bool record_shapes_ = false;
    bool profile_memory_ = true;
};

// Records from construction to stop() (or destruction). Throws ValueError when another profiler is
// running. Not copyable or movable.
class Profiler {
public:
    explicit Profiler(const Options& options = Options());
    ~Profiler();
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;

    // Closes "ProfilerStep#k" and opens "ProfilerStep#(k + 1)". Throws ValueError after stop()
    // and on another thread than the one that made the profiler.
    void step();
    // Ends the recording and returns what was recorded (kept in this object). A second call
    // returns the same profile. Events still open on a thread are closed at the stop.
    const Profile& stop();

private:
    std::int64_t step_event_ = -1;
    std::uint64_t owner_ = 0;  // a hash of the thread that made it
    int steps_ = 0;
    bool stopped_ = false;
    Profile profile_;
};

// A region of the caller's own, as torch.profiler.record_function: an event from construction to
// destruction on this thread; nests. Free when no profiler runs.
class RecordFunction {
public:
    explicit RecordFunction(const char* name, Kind kind = Kind::user);
    explicit RecordFunction(const std::string& name, Kind kind = Kind::user);
    ~RecordFunction() { if (recording_) detail::end_event(handle_); }
    RecordFunction(const RecordFunction&) = delete;
    RecordFunction& operator=(const RecordFunction&) = delete;
    void bytes_sent(std::uint64_t n);  // a collective's payload

private:
    bool recording_ = false;
    detail::Handle handle_;
};

// The engine's phases, per thread, for the trace's lanes: loss.backward() and Optimizer::step()
// set them. Nests; restores the previous lane.
class LaneGuard {
public:
    explicit LaneGuard(Lane lane);
    ~LaneGuard();
    LaneGuard(const LaneGuard&) = delete;
    LaneGuard& operator=(const LaneGuard&) = delete;

private:
    Lane previous_;
};

// An op's forward: the first line of every op, e.g. `profiler::OpScope scope("matmul", a, b);`.
// The name must be the one the op gives make_result. Off, it costs one relaxed load.
class OpScope {
public:
    template <class... Tensors>
    explicit OpScope(const char* name, const Tensors&... inputs) {
        if (detail::active()) {
            const Tensor* ins[] = {&inputs..., nullptr};
            begin(name, ins, sizeof...(inputs));
        }
    }
    OpScope(const char* name, const std::vector<Tensor>& inputs);
    ~OpScope() { if (recording_) detail::end_event(handle_); }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

private:
    void begin(const char* name, const Tensor* const* inputs, std::size_t n);
    bool recording_ = false;
    detail::Handle handle_;
};

// ---- reading a profile ---------------------------------------------------------------------------
// One row of key_averages: the events of one name (and input shapes, when grouped by them).
struct OpStats {
    std::string name;
    std::string shapes;             // with group_by_input_shape; otherwise ""
    Kind kind = Kind::op;
    bool worker = false;            // a pool worker's shares of loops, beside their callers' rows
    std::int64_t calls = 0;
    std::int64_t self_ns = 0;
    std::int64_t total_ns = 0;      // durations summed; an event nested in one of its own name counts twice
    double flops = 0;
    std::uint64_t bytes_allocated = 0;
    std::uint64_t bytes_sent = 0;
    double gflops_per_s() const;    // flops / self time / 1e9; 0 when no FLOPs were counted
};

// The events grouped by name (and by input shapes), sorted by self time, largest first. The step
// events are left out: their self time is the time between ops, reported by table() as "other".
std::vector<OpStats> key_averages(const Profile& profile, bool group_by_input_shape = false);

// The table a learner reads: calls, self and total seconds, self as % of the profiled wall, GFLOP/s,
// MiB allocated; `row_limit` rows (0: all), then the time outside every op on the profiling thread.
std::string table(const std::vector<OpStats>& rows, const Profile& profile, std::size_t row_limit = 20);

// The trace-event JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
// an "X" event per Event, with pid 0 and one tid per thread and lane, named by "M" events; a "C"
// counter "live bytes" per memory sample. Throws std::runtime_error naming the path when it
// cannot be written.
void export_chrome_trace(const Profile& profile, const std::string& path);
std::string chrome_trace_json(const Profile& profile);

// ---- bytes in Arrays, on or off (as torch.cuda.memory_allocated and max_memory_allocated) ------
std::int64_t memory_allocated();      // bytes live in Arrays now
std::int64_t max_memory_allocated();  // the most since the process began or the last reset
void reset_peak_memory_stats();       // max_memory_allocated() ← memory_allocated()

}  // namespace xgrad::profiler
