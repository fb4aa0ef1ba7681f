// tests/core/test_allocator.cpp — core/allocator: 32-byte aligned array storage, the process-wide
// malloc policy, and allocations whose byte count overflows (float32).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

static_assert(std::is_base_of_v<std::invalid_argument, ValueError>);
static_assert(std::is_base_of_v<std::out_of_range, IndexError>);

// ---- the allocator behind Array (core/allocator.hpp) ---------------------------------------------
TEST_CASE("array storage starts on a 32-byte boundary for every size", "[tensor][allocator]") {
    std::vector<Array> arrays;  // kept alive together, so that malloc hands out distinct blocks
    for (std::size_t n : {1, 3, 7, 8, 9, 31, 1000, 100000}) {
        arrays.emplace_back(ArrayShape{n});
        Array& a = arrays.back();
        REQUIRE(reinterpret_cast<std::uintptr_t>(a.data()) % 32 == 0);
        a.fill(real(1));  // every element of the block is writable (ASan checks the bounds)
        REQUIRE(xt::sum(a)() == real(n));
    }
}

TEST_CASE("the malloc policy is in force unless the environment sets its own", "[tensor][allocator]") {
    const bool env_sets_its_own = std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
                                  std::getenv("GLIBC_TUNABLES");
#if defined(XGRAD_TEST_ASAN) || defined(XGRAD_TEST_TSAN)
    constexpr bool glibc_malloc = false;  // the sanitizer's allocator replaces glibc's: mallopt does nothing
#else
    constexpr bool glibc_malloc = true;
#endif
    REQUIRE(apply_malloc_policy() == (glibc_malloc && !env_sets_its_own));
    REQUIRE(apply_malloc_policy() == (glibc_malloc && !env_sets_its_own));  // applied once; later calls report it
}

TEST_CASE("an allocation whose byte count overflows throws instead of wrapping", "[tensor][allocator][errors]") {
    MallocAllocator<real> alloc;
    REQUIRE_THROWS_AS(alloc.allocate(static_cast<std::size_t>(-1) / sizeof(real)), std::bad_array_new_length);
    real* p = alloc.allocate(0);  // a valid, distinct pointer that can be freed
    REQUIRE(p != nullptr);
    alloc.deallocate(p, 0);
}

TEST_CASE("an allocation the system refuses names the bytes asked for", "[tensor][allocator][errors][regression]") {
    // 2^40 values of 4 bytes: 4 TiB, more than any machine here has (the sanitizer build runs with
    // ASAN_OPTIONS=allocator_may_return_null=1, so that its malloc fails the same way).
    const std::string msg = message_of<OutOfMemoryError>([] { zeros({std::int64_t(1) << 40}); });
    REQUIRE_THAT(msg, Contains("allocator") && Contains(std::to_string((std::size_t(1) << 40) * sizeof(real)) + " bytes"));
    REQUIRE_THROWS_AS(zeros({std::int64_t(1) << 40}), std::bad_alloc);  // what callers already catch
}
