// core/allocator.hpp — where the numbers of every Array live: 32-byte-aligned blocks from malloc,
// and the process-wide malloc policy (core/allocator.cpp).
//
// xtensor's default allocator uses posix_memalign, which glibc's per-thread cache does not serve.
// MallocAllocator asks malloc for kAlign extra bytes, rounds the address up to kAlign, and keeps
// malloc's pointer in the 8 bytes below the block for free(). Alignment also fixes the results:
// on an unaligned array xtensor computes the first elements with scalar code (xassign.hpp,
// align_begin), which rounds exp and others differently, so values would depend on addresses.
// Units: bytes. allocate throws std::bad_array_new_length when n·sizeof(T) overflows and
// OutOfMemoryError (core/error.hpp, a std::bad_alloc) naming the bytes when malloc fails; it
// never returns null. Each block's bytes are added to the count of bytes live in Arrays, and taken
// off when it is freed (profiler::memory_allocated, core/profiler.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include <xgrad/core/profiler_hooks.hpp>

namespace xgrad {

// Makes glibc keep freed memory for reuse, as MALLOC_MMAP_THRESHOLD_=33554432 (32 MiB) and
// MALLOC_TRIM_THRESHOLD_=268435456 (256 MiB) would; a process setting either, or GLIBC_TUNABLES,
// keeps its own. Runs once at load (core/tensor.cpp); returns whether it is in force. Never throws.
bool apply_malloc_policy();

// Throws OutOfMemoryError: "allocator: not enough memory: tried to allocate <bytes> bytes (<GiB>)".
[[noreturn]] void throw_out_of_memory(std::size_t bytes);

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
        if (raw == nullptr) throw_out_of_memory(n * sizeof(T));
        // malloc's blocks are 16-byte aligned: the gap below `aligned` (16 or 32 bytes) holds raw.
        const auto address = (reinterpret_cast<std::uintptr_t>(raw) + kAlign) & ~std::uintptr_t{kAlign - 1};
        void** aligned = reinterpret_cast<void**>(address);
        aligned[-1] = raw;
        profiler::detail::allocated(n * sizeof(T));  // the live bytes (core/profiler.hpp)
        return reinterpret_cast<T*>(aligned);
    }

    void deallocate(T* p, std::size_t n) noexcept {
        if (p == nullptr) return;
        std::free(reinterpret_cast<void**>(p)[-1]);
        profiler::detail::freed(n * sizeof(T));
    }

    // Any block may be freed through any instance.
    template <class U>
    bool operator==(const MallocAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const MallocAllocator<U>&) const noexcept { return false; }
};

}  // namespace xgrad
