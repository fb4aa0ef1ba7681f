// core/allocator.cpp — the per-thread cache of freed array blocks (see allocator.hpp).
#include "core/allocator.hpp"

#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace xgrad {

namespace {

using detail::kGranule;

// bytes rounded up to a whole number of granules (at least one).
std::size_t block_size(std::size_t bytes) {
    if (bytes > static_cast<std::size_t>(-1) - kGranule) throw std::bad_alloc();
    return bytes == 0 ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule;
}

void* system_allocate(std::size_t size) {
    void* p = nullptr;
    if (posix_memalign(&p, kGranule, size) != 0) throw std::bad_alloc();
    return p;
}

// One thread's free lists: block size in bytes → the blocks of that size, ready for reuse.
struct ThreadCache {
    std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
    std::size_t cached_bytes = 0;
    std::size_t cached_blocks = 0;

    void release_all() noexcept {
        for (auto& entry : free_blocks)
            for (void* p : entry.second) std::free(p);
        free_blocks.clear();
        cached_bytes = cached_blocks = 0;
    }
};

// The cache lives as long as its thread. thread_local objects are destroyed before static
// ones, so an Array inside a static object can be freed after its thread's cache is gone:
// `cache_gone` (a plain bool, readable until the thread ends) then sends the block to free().
thread_local bool cache_gone = false;

struct CacheHolder {
    ThreadCache cache;
    ~CacheHolder() {
        cache.release_all();
        cache_gone = true;
    }
};

ThreadCache* this_thread_cache() {
#ifdef XGRAD_NO_ALLOCATOR_CACHE
    return nullptr;  // sanitizer builds: every block goes to and from malloc
#else
    if (cache_gone) return nullptr;
    thread_local CacheHolder holder;
    return &holder.cache;
#endif
}

}  // namespace

namespace detail {

void* cached_allocate(std::size_t bytes) {
    const std::size_t size = block_size(bytes);
    if (ThreadCache* cache = this_thread_cache()) {
        auto it = cache->free_blocks.find(size);
        if (it != cache->free_blocks.end() && !it->second.empty()) {
            void* p = it->second.back();  // a block of exactly this size, freed earlier
            it->second.pop_back();
            cache->cached_bytes -= size;
            cache->cached_blocks -= 1;
            return p;
        }
    }
    return system_allocate(size);
}

void cached_deallocate(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    const std::size_t size = bytes == 0 ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule;
    ThreadCache* cache = this_thread_cache();
    if (cache == nullptr || size > kMaxCachedBlock || cache->cached_bytes + size > kMaxCachedBytes) {
        std::free(p);
        return;
    }
    try {
        cache->free_blocks[size].push_back(p);
    } catch (...) {  // no memory for the list entry itself: give the block back instead
        std::free(p);
        return;
    }
    cache->cached_bytes += size;
    cache->cached_blocks += 1;
}

}  // namespace detail

AllocatorCacheStats allocator_cache_stats() {
    AllocatorCacheStats s;
    if (const ThreadCache* cache = this_thread_cache()) {
        s.cached_blocks = cache->cached_blocks;
        s.cached_bytes = cache->cached_bytes;
    }
    return s;
}

void empty_allocator_cache() {
    if (ThreadCache* cache = this_thread_cache()) cache->release_all();
}

}  // namespace xgrad
