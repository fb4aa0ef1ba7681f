// core/allocator.cpp — the process-wide malloc policy (see core/allocator.hpp).
//
// Every training step allocates and frees the same arrays: activations, gradients,
// temporaries. By default glibc serves each block over 128 KiB with its own mmap and unmaps it
// when freed, and gives the top of the heap back to the kernel once a few MiB of it are free;
// each step then faults all of its pages in again, and the kernel zeroes every one. With blocks
// up to 32 MiB served from the heap, and the heap trimmed only past 256 MiB of free space, the
// pages stay mapped for the next step. Peak memory does not grow: freed blocks are reused.
// ref: glibc manual, "Memory Allocation Tunables" (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
#include "core/allocator.hpp"

#include <malloc.h>

#include <cstdlib>

namespace xgrad {

bool apply_malloc_policy() {
    static const bool applied = [] {
        if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
            std::getenv("GLIBC_TUNABLES"))
            return false;
        return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
    }();
    return applied;
}

}  // namespace xgrad
