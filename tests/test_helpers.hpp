// tests/test_helpers.hpp — comparison helpers shared by the test files.
//
//   require_values(t, {{1, 2}, {3, 4}})   t has exactly that shape, and each value agrees
//                                         within tol (absolute or relative, whichever is larger)
//   REQUIRE_GRADCHECK(f, x, y, ...)       gradcheck(f, {x, y, ...}) checked something and passed;
//                                         on failure Catch prints the first mismatch
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <functional>
#include <vector>

#include "core/gradcheck.hpp"
#include "core/ops.hpp"

namespace xgrad::testing {

inline void require_values(const Tensor& t, const Tensor& expected, double tol = 1e-5) {
    REQUIRE(t.defined());
    REQUIRE(t.shape() == expected.shape());
    for (std::size_t i = 0; i < t.numel(); ++i) {
        INFO("flat element " << i << " of shape " << shape_str(t.shape()));
        REQUIRE(t.data().data()[i] == Approx(expected.data().data()[i]).epsilon(tol).margin(tol));
    }
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A leaf of `shape` with N(0, 1) values that requires grad.
inline Tensor leaf(const Shape& shape) { return randn(shape, true); }

template <class... Ts>
GradcheckResult run_gradcheck(const Fn& f, const Ts&... inputs) {
    return gradcheck(f, std::vector<Tensor>{inputs...});
}

}  // namespace xgrad::testing

// Variadic, so that commas inside lambdas ([d, keep], {a, b}) are harmless.
#define REQUIRE_GRADCHECK(...)                                                \
    do {                                                                      \
        const ::xgrad::GradcheckResult r_ = ::xgrad::testing::run_gradcheck(__VA_ARGS__); \
        INFO(r_.message);                                                     \
        REQUIRE(r_.checked > 0);                                              \
        REQUIRE(r_.ok);                                                       \
    } while (0)
