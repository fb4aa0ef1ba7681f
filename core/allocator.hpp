// core/allocator.hpp — where the numbers of every Array live: malloc, with a cache of freed blocks.
//
// A training step allocates the same arrays every time it runs: the activations of the forward
// pass, the gradients of the backward pass, the temporaries of each op, always with the same
// sizes. glibc serves each such request (xtensor asks for 32-byte-aligned memory) through its
// memalign path, which carves a block out of a larger one and frees the leftovers; it does
// not use its fast per-thread cache (tcache) for aligned requests (glibc 2.36). On the small
// char-MLP step that cost 2 µs of 40 (bench/, workload W1: perf showed _int_memalign,
// _int_free and malloc_consolidate at 10% of the step).
//
// So every thread keeps the blocks it frees in lists keyed by size, and the next request of
// that size takes one back: a vector pop instead of a trip through the heap. From the second
// step on, a training loop allocates nothing from malloc at all.
//
//   allocate(bytes)    bytes rounded up to kGranule; from this thread's list for that size
//                      if one is there, else posix_memalign (kGranule-aligned)
//   deallocate(p)      into this thread's list for that size, unless the block is larger than
//                      kMaxCachedBlock or the lists already hold kMaxCachedBytes: then free()
//
// Blocks may be freed by another thread than the one that allocated them; they then join that
// thread's lists, and every list is given back to malloc when its thread exits. Sanitizer
// builds (XGRAD_SANITIZE) skip the cache, so AddressSanitizer still sees every array's
// allocation and free and can report a use after free.
//
// Units: bytes throughout.
#pragma once

#include <cstddef>
#include <new>

namespace xgrad {

namespace detail {
constexpr std::size_t kGranule = 64;                          // alignment and rounding: a cache line
constexpr std::size_t kMaxCachedBlock = std::size_t{4} << 20;   // larger blocks go back to free()
constexpr std::size_t kMaxCachedBytes = std::size_t{64} << 20;  // per thread, over all sizes

// Throw std::bad_alloc when the memory cannot be had (never return null).
void* cached_allocate(std::size_t bytes);
void cached_deallocate(void* p, std::size_t bytes) noexcept;
}  // namespace detail

// What the calling thread's cache holds now, for tests and for memory reports.
struct AllocatorCacheStats {
    std::size_t cached_blocks = 0;  // blocks waiting to be reused
    std::size_t cached_bytes = 0;   // their total size, bytes (after rounding to kGranule)
};
AllocatorCacheStats allocator_cache_stats();

// Return every block this thread holds to malloc (e.g. before measuring peak memory).
void empty_allocator_cache();

// The standard-allocator face of the cache, for xtensor's storage (see Array in tensor.hpp).
template <class T>
struct CachingAllocator {
    using value_type = T;

    CachingAllocator() noexcept = default;
    template <class U>
    CachingAllocator(const CachingAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(detail::cached_allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept { detail::cached_deallocate(p, n * sizeof(T)); }

    // Any block may be handed back through any instance: all instances are interchangeable.
    template <class U>
    bool operator==(const CachingAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const CachingAllocator<U>&) const noexcept { return false; }
};

}  // namespace xgrad
