// core/allocator.cpp — the process-wide malloc policy (see core/allocator.hpp).
//
// Every step allocates and frees the same arrays. By default glibc mmaps each block over 128 KiB
// and unmaps it when freed, so each step faults (and the kernel zeroes) its pages again. Serving
// blocks up to 32 MiB from the heap, trimmed past 256 MiB free, keeps them mapped for reuse.
// ref: glibc manual, "Memory Allocation Tunables" (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
#include <xgrad/core/allocator.hpp>

#include <malloc.h>

#include <cstdlib>

#include <xgrad/core/error.hpp>

namespace xgrad {

// Under AddressSanitizer or ThreadSanitizer the sanitizer's allocator replaces glibc's; mallopt then
// returns 0 and the policy is not in force.
bool apply_malloc_policy() {
    static const bool applied = [] {
        if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
            std::getenv("GLIBC_TUNABLES"))
            return false;
        return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
    }();
    return applied;
}

void throw_out_of_memory(std::size_t bytes) {
    throw OutOfMemoryError(fmt::format("allocator: not enough memory: tried to allocate {} bytes ({:.2f} GiB) "
                                       "for an array", bytes, double(bytes) / (1 << 30)));
}

}  // namespace xgrad
