// nn/feed_forward.cpp — the SwiGLU feed-forward and LLaMA's hidden-width rule (nn/feed_forward.hpp).
// Composed from Linear, silu and mul: autograd derives the backward. Tests:
// tests/nn/test_feed_forward.cpp (values by hand), tests/nn/gradcheck_feed_forward.cpp.
#include <xgrad/nn/feed_forward.hpp>

#include <cstdint>

#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/nn/activation.hpp>

namespace xgrad::nn {

std::int64_t swiglu_hidden_width(std::int64_t d, std::int64_t multiple_of) {
    check(d >= 1 && multiple_of >= 1, "swiglu_hidden_width",
          "d and multiple_of must be positive; got d = {}, multiple_of = {}", d, multiple_of);
    check(d <= (std::int64_t(1) << 58) && multiple_of <= (std::int64_t(1) << 60), "swiglu_hidden_width",
          "d = {} (at most 2^58) or multiple_of = {} (at most 2^60) is too large for 8d/3 in int64", d, multiple_of);
    const std::int64_t h = 2 * (4 * d) / 3;                          // int(2 * hidden_dim / 3), hidden_dim = 4d
    return multiple_of * ((h + multiple_of - 1) / multiple_of);      // rounded up to a multiple
}

SwiGLU::SwiGLU(std::int64_t d, std::int64_t hidden, bool bias) {
    check(d >= 1 && hidden >= 1, "SwiGLU", "d and hidden must be positive; got d = {}, hidden = {}", d, hidden);
    check(std::uint64_t(hidden) <= kMaxNumel / std::uint64_t(d), "SwiGLU",
          "(hidden, d) = ({}, {}) weights are too large: more than 2^60 elements", hidden, d);
    w1 = register_module("w1", std::make_shared<Linear>(d, hidden, bias));
    w2 = register_module("w2", std::make_shared<Linear>(hidden, d, bias));
    w3 = register_module("w3", std::make_shared<Linear>(d, hidden, bias));
}

Tensor SwiGLU::forward(const Tensor& x) const {
    const Tensor gate = functional::silu(w1->forward(x));  // (..., hidden)
    const Tensor value = w3->forward(x);                   // (..., hidden)
    return w2->forward(gate * value);                      // (..., d)
}

}  // namespace xgrad::nn
