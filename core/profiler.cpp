// core/profiler.cpp — recording: each thread's events, the profiler's start and stop.
//
// Each thread writes to a buffer of its own (a vector of events and a stack of the open ones),
// made the first time it records in a session and kept in the session's list, so that stop()
// finds every thread's buffer even after the thread has ended. A buffer's mutex is taken by its
// own thread for each event and by stop() once: never contended but at the stop.
// The outputs (key_averages, table, the trace) are core/profiler_report.cpp.
#include <xgrad/core/profiler.hpp>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace xgrad::profiler {

namespace {
using Clock = std::chrono::steady_clock;

struct ThreadBuffer {
    std::mutex mutex;
    std::uint32_t session = 0;
    bool harvested = false;             // stop() has taken the events
    std::vector<Event> events;          // in begin order: a parent before its children
    std::vector<std::int64_t> open;     // indices of the open events, innermost last
    std::vector<MemorySample> memory;   // event: an index in `events`
};

// The running session. Guarded by its mutex; `id` is also published through g_session_id.
struct Session {
    std::mutex mutex;
    std::uint32_t id = 0;
    bool running = false;
    Options options;
    std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // index = Event::thread
    std::vector<std::string> names;
};
Session& session() {
    static auto* const s = new Session();  // never destroyed: a thread may record during exit
    return *s;
}
std::atomic<std::uint32_t> g_session_id{0};
std::atomic<std::int64_t> g_start_ns{0};  // the session's start, on Clock, in ns
std::atomic<bool> g_record_shapes{false};
std::atomic<bool> g_profile_memory{false};

thread_local std::shared_ptr<ThreadBuffer> t_buffer;
thread_local Lane t_lane = Lane::forward;
// A char array, not a std::string: a thread_local with a destructor registers it at the thread's
// start (glibc's __cxa_thread_atexit), and a pool worker still alive at exit() would show that
// record to LeakSanitizer as a leak. Empty: "main" or "thread k".
thread_local char t_thread_name[40] = {};

std::int64_t clock_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
std::uint64_t this_thread_hash() { return std::hash<std::thread::id>()(std::this_thread::get_id()); }
std::int64_t now_ns() { return clock_ns() - g_start_ns.load(std::memory_order_relaxed); }

// This thread's buffer in the running session, made on first use; null when none runs.
ThreadBuffer* buffer() {
    const std::uint32_t id = g_session_id.load(std::memory_order_acquire);
    if (t_buffer && t_buffer->session == id) return t_buffer.get();
    Session& s = session();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.running || s.id != id) return nullptr;
    auto b = std::make_shared<ThreadBuffer>();
    b->session = id;
    s.names.push_back(t_thread_name[0] != 0 ? std::string(t_thread_name) : s.buffers.empty() ? "main" : fmt::format("thread {}", s.buffers.size()));
    s.buffers.push_back(b);
    t_buffer = std::move(b);
    return t_buffer.get();
}

// Opens an event on this thread; a handle with index -1 when no profiler records.
detail::Handle begin_event(std::string name, Kind kind, std::string shapes = {}) {
    ThreadBuffer* b = buffer();
    if (b == nullptr) return {};
    Event e;
    e.name = std::move(name);
    e.kind = kind;
    e.lane = kind == Kind::step ? Lane::step : t_lane;
    e.shapes = std::move(shapes);
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->harvested) return {};
    e.start_ns = now_ns();
    if (!b->open.empty()) {
        e.parent = b->open.back();
        e.depth = b->events[std::size_t(e.parent)].depth + 1;
    }
    b->events.push_back(std::move(e));
    b->open.push_back(std::int64_t(b->events.size()) - 1);
    return {b->session, b->open.back()};
}

std::string shapes_of(const Tensor* const* inputs, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0) out += ", ";
        out += inputs[i]->defined() ? shape_str(inputs[i]->shape()) : "undefined";
    }
    return out;
}

// The ops whose FLOPs are their output's element count (one arithmetic operation a value).
bool is_elementwise(const std::string& name) {
    static const char* const kOps[] = {"add", "sub", "mul", "div", "neg", "add_scalar", "mul_scalar", "rsub_scalar",
                                       "rdiv_scalar", "pow", "exp", "log", "tanh", "relu", "sigmoid", "gelu",
                                       "silu", "sqrt", "rsqrt", "abs", "clamp", "maximum", "minimum"};
    return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return name == op; });
}
}  // namespace

// ---- the hooks ----------------------------------------------------------------------------------
namespace detail {
void end_event(const Handle& h) {
    if (h.index < 0) return;
    ThreadBuffer* b = t_buffer.get();
    if (b == nullptr || b->session != h.session) return;
    const std::int64_t now = now_ns();
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->harvested || std::find(b->open.begin(), b->open.end(), h.index) == b->open.end()) return;
    // Events ended out of order (an exception past a scope's owner) are closed here too.
    while (!b->open.empty()) {
        const std::int64_t top = b->open.back();
        b->open.pop_back();
        Event& e = b->events[std::size_t(top)];
        e.duration_ns = now - e.start_ns;
        if (top == h.index) break;
    }
}

void note_memory(std::int64_t bytes, std::int64_t live) {
    try {
        ThreadBuffer* b = buffer();
        if (b == nullptr) return;
        const std::int64_t now = now_ns();
        std::lock_guard<std::mutex> lock(b->mutex);
        if (b->harvested) return;
        const std::int64_t top = b->open.empty() ? -1 : b->open.back();
        if (bytes > 0 && top >= 0) b->events[std::size_t(top)].bytes_allocated += std::uint64_t(bytes);
        if (g_profile_memory.load(std::memory_order_relaxed)) b->memory.push_back({now, live, top});
    } catch (...) {  // from the allocator's noexcept deallocate: a sample lost, never a throw
    }
}

void add_flops(double flops) {
    ThreadBuffer* b = buffer();
    if (b == nullptr) return;
    std::lock_guard<std::mutex> lock(b->mutex);
    if (!b->harvested && !b->open.empty()) b->events[std::size_t(b->open.back())].flops += flops;
}

void note_result(const char* name, std::size_t elements) {
    if (!is_elementwise(name)) return;
    ThreadBuffer* b = buffer();
    if (b == nullptr) return;
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->harvested || b->open.empty()) return;
    Event& e = b->events[std::size_t(b->open.back())];
    if (e.kind == Kind::op && e.name == name) e.flops += double(elements);
}

void name_this_thread(const char* name) { std::snprintf(t_thread_name, sizeof t_thread_name, "%s", name); }

std::string innermost_name() {
    ThreadBuffer* b = buffer();
    if (b == nullptr) return {};
    std::lock_guard<std::mutex> lock(b->mutex);
    return b->harvested || b->open.empty() ? std::string() : b->events[std::size_t(b->open.back())].name;
}

Handle begin(const std::string& name, Kind kind) { return begin_event(name, kind); }
Lane lane() { return t_lane; }
}  // namespace detail

// ---- scopes -------------------------------------------------------------------------------------
RecordFunction::RecordFunction(const char* name, Kind kind) {
    if (!detail::active()) return;
    handle_ = begin_event(name, kind);
    recording_ = handle_.index >= 0;
}
RecordFunction::RecordFunction(const std::string& name, Kind kind) {  // all of its bytes, not up to a NUL
    if (!detail::active()) return;
    handle_ = begin_event(name, kind);
    recording_ = handle_.index >= 0;
}

void RecordFunction::bytes_sent(std::uint64_t n) {
    if (!recording_) return;
    ThreadBuffer* b = t_buffer.get();
    if (b == nullptr || b->session != handle_.session) return;
    std::lock_guard<std::mutex> lock(b->mutex);
    if (!b->harvested && handle_.index < std::int64_t(b->events.size())) b->events[std::size_t(handle_.index)].bytes_sent += n;
}

LaneGuard::LaneGuard(Lane lane) : previous_(t_lane) { t_lane = lane; }
LaneGuard::~LaneGuard() { t_lane = previous_; }

void OpScope::begin(const char* name, const Tensor* const* inputs, std::size_t n) {
    handle_ = begin_event(name, Kind::op, g_record_shapes.load(std::memory_order_relaxed) ? shapes_of(inputs, n) : "");
    recording_ = handle_.index >= 0;
}

OpScope::OpScope(const char* name, const std::vector<Tensor>& inputs) {
    if (!detail::active()) return;
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    begin(name, ptrs.data(), ptrs.size());
}

// ---- the profiler -------------------------------------------------------------------------------
namespace {
// A fork()ed child has only the forking thread: it records nothing of its parent's session.
// The other threads' buffers are left behind unfreed (one may have been mid-write, its mutex held);
// the forking thread's own, never locked across a fork, stays, so that a stop() in the child works.
void stop_in_child() {
    Session& s = session();
    new (&s.mutex) std::mutex();  // another thread may have held it at the fork
    s.running = false;
    detail::g_active.store(false, std::memory_order_relaxed);
    auto* left = new std::vector<std::shared_ptr<ThreadBuffer>>();  // never freed: see above
    std::vector<std::shared_ptr<ThreadBuffer>> kept;
    std::vector<std::string> names;
    for (std::size_t t = 0; t < s.buffers.size(); ++t) {
        if (s.buffers[t] == t_buffer) {
            kept.push_back(s.buffers[t]);
            names.push_back(s.names[t]);
        } else {
            left->push_back(s.buffers[t]);
        }
    }
    s.buffers = std::move(kept);
    s.names = std::move(names);
}
}  // namespace

Profiler::Profiler(const Options& options) {
    static const int registered = pthread_atfork(nullptr, nullptr, stop_in_child);
    (void)registered;
    Session& s = session();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        check(!s.running, "Profiler", "another profiler is already recording; stop() it first (one runs at a time)");
        s.running = true;
        s.id += 1;
        s.options = options;
        s.buffers.clear();
        s.names.clear();
        g_record_shapes.store(options.record_shapes(), std::memory_order_relaxed);
        g_profile_memory.store(options.profile_memory(), std::memory_order_relaxed);
        g_session_id.store(s.id, std::memory_order_release);
    }
    profile_.live_bytes_at_start = memory_allocated();
    ThreadBuffer* b = buffer();  // this thread first: thread 0, "main"
    g_start_ns.store(clock_ns(), std::memory_order_relaxed);
    step_event_ = begin_event("ProfilerStep#0", Kind::step).index;
    {  // time 0 is when step 0 opens: the wall holds no time of the profiler's own start
        std::lock_guard<std::mutex> lock(b->mutex);
        Event& step = b->events[std::size_t(step_event_)];
        g_start_ns.fetch_add(step.start_ns, std::memory_order_relaxed);
        step.start_ns = 0;
    }
    owner_ = this_thread_hash();
    detail::g_active.store(true, std::memory_order_release);  // other threads record from here
}

Profiler::~Profiler() {
    if (!stopped_) stop();
}

void Profiler::step() {
    check(!stopped_, "Profiler::step", "the profiler was stopped; make a new one to record again");
    check(owner_ == this_thread_hash(), "Profiler::step", "called on another thread than the one that made the profiler");
    detail::end_event({g_session_id.load(std::memory_order_relaxed), step_event_});
    step_event_ = begin_event(fmt::format("ProfilerStep#{}", ++steps_), Kind::step).index;
}

const Profile& Profiler::stop() {
    if (stopped_) return profile_;
    stopped_ = true;
    detail::g_active.store(false, std::memory_order_release);
    Session& s = session();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.running = false;
    const std::int64_t stop_ns = now_ns();  // the wall's end: the last step, and every event still open, end here
    profile_.wall_ns = stop_ns;
    profile_.thread_names = s.names;
    for (std::size_t t = 0; t < s.buffers.size(); ++t) {
        ThreadBuffer& b = *s.buffers[t];
        std::lock_guard<std::mutex> buffer_lock(b.mutex);
        b.harvested = true;
        for (const std::int64_t open : b.open) {  // still open at the stop: closed there
            Event& e = b.events[std::size_t(open)];
            e.duration_ns = stop_ns - e.start_ns;
        }
        const auto base = std::int64_t(profile_.events.size());
        for (Event& e : b.events) {
            e.thread = int(t);
            if (e.parent >= 0) e.parent += base;
            e.self_ns = e.duration_ns;
            profile_.events.push_back(std::move(e));
        }
        for (MemorySample m : b.memory) {
            if (m.event >= 0) m.event += base;
            profile_.memory.push_back(m);
        }
        b.events.clear();
        b.memory.clear();
    }
    s.buffers.clear();
    for (const Event& e : profile_.events)
        if (e.parent >= 0) profile_.events[std::size_t(e.parent)].self_ns -= e.duration_ns;
    std::stable_sort(profile_.memory.begin(), profile_.memory.end(),
                     [](const MemorySample& a, const MemorySample& b) { return a.time_ns < b.time_ns; });
    return profile_;
}

const MemorySample& Profile::peak() const {
    check(!memory.empty(), "Profile::peak", "no memory samples (profile_memory(false), or nothing allocated)");
    return *std::max_element(memory.begin(), memory.end(),
                             [](const MemorySample& a, const MemorySample& b) { return a.live_bytes < b.live_bytes; });
}

// ---- bytes in Arrays ------------------------------------------------------------------------------
std::int64_t memory_allocated() { return detail::g_live_bytes.load(std::memory_order_relaxed); }
std::int64_t max_memory_allocated() { return detail::g_peak_bytes.load(std::memory_order_relaxed); }
void reset_peak_memory_stats() { detail::g_peak_bytes.store(memory_allocated(), std::memory_order_relaxed); }

}  // namespace xgrad::profiler
