// core/error.hpp — how xgrad reports misuse.
//
// Every misuse throws; nothing aborts. Messages start with the op's name and give the
// offending shapes or values and the valid range, for example
//     embedding: index 12 at position (1, 4) out of range [0, 10)
//
//   ValueError  (a std::invalid_argument)  wrong shapes, bad dims, bad options, misuse of autograd
//   IndexError  (a std::out_of_range)      an index or ID outside its valid range
//   OutOfMemoryError (a std::bad_alloc)    an array the system cannot allocate, naming the bytes
// The classes are defined in io/error.hpp, beneath every folder, so that text/ throws them too.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <xgrad/io/error.hpp>

namespace xgrad {

// "(2, 3, 4)"; "()" for a scalar.
template <class Seq>
std::string shape_str(const Seq& shape) {
    return fmt::format("({})", fmt::join(shape, ", "));
}

// The same, formatted only if a message is built (hot-path checks); use only as a check() argument.
template <class Seq>
struct LazyShape {
    const Seq& shape;
};
template <class Seq>
LazyShape<Seq> lazy_shape(const Seq& shape) {
    return {shape};
}

// check(cond, "matmul", "inner sizes differ: {} vs {}", a, b) throws ValueError("matmul: ...").
template <class... Args>
void check(bool cond, const char* op, fmt::format_string<Args...> msg, Args&&... args) {
    if (!cond) {
        throw ValueError(std::string(op) + ": " + fmt::format(msg, std::forward<Args>(args)...));
    }
}

template <class... Args>
void check_index(bool cond, const char* op, fmt::format_string<Args...> msg, Args&&... args) {
    if (!cond) {
        throw IndexError(std::string(op) + ": " + fmt::format(msg, std::forward<Args>(args)...));
    }
}

}  // namespace xgrad

template <class Seq>
struct fmt::formatter<xgrad::LazyShape<Seq>> : fmt::formatter<std::string> {
    template <class FormatContext>
    auto format(const xgrad::LazyShape<Seq>& s, FormatContext& ctx) const {
        return fmt::formatter<std::string>::format(xgrad::shape_str(s.shape), ctx);
    }
};
