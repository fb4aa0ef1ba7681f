// tests/test_helpers.hpp — comparison helpers shared by the test files.
//
//   require_values(t, {{1, 2}, {3, 4}})   t has exactly that shape, and each value agrees
//                                         within tol (absolute or relative, whichever is larger)
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>

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

}  // namespace xgrad::testing
