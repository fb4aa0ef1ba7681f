// core/detail/simd.hpp — the one SIMD helper: a register of real values and its loads and stores.
// Legend: a Batch is one SIMD register of W values of type real (xsimd::batch<real>): W = 8
// floats or 4 doubles with AVX2, the library's width; 16 or 8 in nn/activation.cpp and
// nn/attention/tiled.cpp where the machine has AVX-512 (CMakeLists.txt). A row is walked in whole
// registers, then a tail of fewer than W.
// ref: xsimd docs, xsimd::batch (load_unaligned, store_unaligned, hadd).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include <xgrad/core/tensor.hpp>

namespace xgrad::simd {

using Batch = xsimd::batch<real>;
constexpr std::size_t W = Batch::size;  // SIMD lanes

// V = Batch: W values from p (any alignment); V = real: *p. One lambda is loop and tail (for_row).
template <class V = Batch>
V load(const real* p) {
    if constexpr (std::is_same_v<V, Batch>) return Batch::load_unaligned(p);
    else return *p;
}
inline void store(const Batch& v, real* p) { v.store_unaligned(p); }
inline void store(real v, real* p) { *p = v; }

// Tail-safe: values [i, i + W) of p, which holds n values; lanes past n are 0. A template, as
// load<V> above, so that its symbol names the register type: a file compiled for wider registers
// (CMakeLists.txt) then never shares a definition with the others (the return type alone is not
// part of a function's symbol).
template <class V = Batch>
V load(const real* p, std::size_t i, std::size_t n) {
    if (i + W <= n) return Batch::load_unaligned(p + i);
    alignas(64) real buf[W] = {};
    std::copy(p + i, p + n, buf);
    return Batch::load_aligned(buf);
}
// Tail-safe: stores the lanes of b that fall before n into p[i, ...).
inline void store(const Batch& b, real* p, std::size_t i, std::size_t n) {
    if (i + W <= n) return b.store_unaligned(p + i);
    alignas(64) real buf[W];
    b.store_aligned(buf);
    std::copy(buf, buf + (n - i), p + i);
}

// Calls f(Batch(), j) for each whole register j .. j + W - 1 in [begin, end), then f(real(), j)
// for each value of the tail. In f, V = decltype(first argument) picks load<V>.
template <class F>
void for_row(std::size_t begin, std::size_t end, F&& f) {
    std::size_t j = begin;
    for (; j + W <= end; j += W) f(Batch(), j);
    for (; j < end; ++j) f(real(), j);
}

}  // namespace xgrad::simd
