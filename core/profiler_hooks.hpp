// core/profiler_hooks.hpp — what the allocator, gemm and the ops call into the profiler
// (core/profiler.hpp; not for users). Free of Tensor, so that core/allocator.hpp can include it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace xgrad::profiler::detail {

// Whether a profiler is recording: the one check an op makes when none is.
inline std::atomic<bool> g_active{false};
inline bool active() { return g_active.load(std::memory_order_relaxed); }

// Bytes live in Arrays, and the most since the last reset: kept always (core/profiler.hpp).
inline std::atomic<std::int64_t> g_live_bytes{0};
inline std::atomic<std::int64_t> g_peak_bytes{0};

// An open event: its session (a profiler's run) and its index on its thread, -1 for none.
struct Handle {
    std::uint32_t session = 0;
    std::int64_t index = -1;
};
void end_event(const Handle& h);

// While a profiler records: charge `bytes` to this thread's innermost event and sample `live`.
void note_memory(std::int64_t bytes, std::int64_t live);
// Adds FLOPs to this thread's innermost event (xgrad::gemm calls it with 2·M·N·K).
void add_flops(double flops);
inline void count_flops(double flops) {
    if (active()) add_flops(flops);
}

inline void allocated(std::size_t bytes) {
    const auto n = static_cast<std::int64_t>(bytes);
    const std::int64_t live = g_live_bytes.fetch_add(n, std::memory_order_relaxed) + n;
    std::int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
    while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    if (active()) note_memory(n, live);
}
inline void freed(std::size_t bytes) {
    const auto n = static_cast<std::int64_t>(bytes);
    const std::int64_t live = g_live_bytes.fetch_sub(n, std::memory_order_relaxed) - n;
    if (active()) note_memory(-n, live);
}

// Names this thread in traces ("pool worker 2"); the pool's workers call it when they start.
void name_this_thread(const char* name);

}  // namespace xgrad::profiler::detail
