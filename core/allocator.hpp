// core/allocator.hpp — where the numbers of every Array live: 32-byte-aligned blocks from malloc,
// and the process-wide malloc policy (core/allocator.cpp).
//
// Under XTENSOR_USE_XSIMD, xtensor's default allocator (xsimd::aligned_allocator) asks for
// 32-byte alignment with posix_memalign. glibc serves such a request by carving it out of a
// larger block and freeing the leftovers, and its fast per-thread cache (tcache) does not
// serve aligned requests (glibc 2.36), so every small array took the slow path.
//
// MallocAllocator asks plain malloc for kAlign bytes more than it needs, rounds the address
// up to the next multiple of kAlign, and keeps malloc's own pointer in the 8 bytes just below
// the block for free(). The alignment matters for more than speed: when xtensor assigns an
// expression to an array that does not start on a 32-byte boundary, it computes the first
// few elements with scalar code and the rest with SIMD code (xassign.hpp, align_begin), and
// for functions such as exp the two round differently. Results would then depend on where
// malloc happened to put an array, and a run resumed from a checkpoint would drift from the
// uninterrupted one in the last digit (examples/char_mlp's resume check, with std::allocator).
//
// Units: bytes. allocate throws std::bad_array_new_length when n·sizeof(T) overflows and
// std::bad_alloc when malloc fails; it never returns null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace xgrad {

// Makes glibc keep freed memory mapped for reuse: blocks up to 32 MiB come from the heap (not a
// fresh mmap each), and the heap is trimmed only past 256 MiB free; the settings that
// MALLOC_MMAP_THRESHOLD_=33554432 and MALLOC_TRIM_THRESHOLD_=268435456 would make. A process that
// sets either variable, or GLIBC_TUNABLES, keeps its own. Runs once, when the library is loaded
// (core/tensor.cpp calls it); returns whether the policy is in force. Never throws.
bool apply_malloc_policy();

template <class T>
struct MallocAllocator {
    using value_type = T;
    static constexpr std::size_t kAlign = 32;  // bytes: one AVX register

    MallocAllocator() noexcept = default;
    template <class U>
    MallocAllocator(const MallocAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        if (n > (static_cast<std::size_t>(-1) - kAlign) / sizeof(T)) throw std::bad_array_new_length();
        void* raw = std::malloc(n * sizeof(T) + kAlign);
        if (raw == nullptr) throw std::bad_alloc();
        // malloc's blocks are 16-byte aligned, so the gap below `aligned` is 16 or 32 bytes:
        // always room for the 8-byte pointer that free() will need.
        const auto address = (reinterpret_cast<std::uintptr_t>(raw) + kAlign) & ~std::uintptr_t{kAlign - 1};
        void** aligned = reinterpret_cast<void**>(address);
        aligned[-1] = raw;
        return reinterpret_cast<T*>(aligned);
    }

    void deallocate(T* p, std::size_t) noexcept {
        if (p != nullptr) std::free(reinterpret_cast<void**>(p)[-1]);
    }

    // Any block may be freed through any instance.
    template <class U>
    bool operator==(const MallocAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const MallocAllocator<U>&) const noexcept { return false; }
};

}  // namespace xgrad
