// nn/attention/detail/shape.hpp — internal: the argument checks that the attention kernels
// (nn/attention/*.cpp) and the module (nn/attention.cpp) share. Not installed.
#pragma once

#include <cstddef>
#include <optional>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn::functional::detail {

// The sizes of one attention call: q (..., Tq, hd), k (..., Tk, hd), v (..., Tk, hv).
struct AttentionSizes {
    ArrayShape lead;  // the leading dims "..."
    std::size_t Tq = 0, Tk = 0, hd = 0, hv = 0;
};

// Checks q, k and v (v may be null) as scaled_dot_product_attention documents; op names the caller.
AttentionSizes check_qkv(const Tensor& q, const Tensor& k, const Tensor* v, const char* op);

// The scale of the scores: `scale` if given, else 1/√hd (PyTorch's default). Throws ValueError
// naming op for a NaN or infinite scale, which would make every score NaN.
real attention_scale(std::optional<double> scale, std::size_t hd, const char* op);

// Throws OutOfMemoryError naming op when what a fused kernel holds at once, the weights P (N, Tq, Tk)
// and, with a backward, one (Tq, Tk) scratch per thread, exceeds the machine's physical memory:
// with overcommit the allocations succeed and the process is killed as it fills them.
void check_weights_fit(std::size_t N, std::size_t Tq, std::size_t Tk, bool backward, const char* op);

// Checks that attn_mask broadcasts to `target` (..., Tq, Tk) and holds only the values 0 and 1.
// Warns once per process on stderr, naming op, when Tq = Tk ≥ 2 and the mask hides every query's
// own position (a 0 diagonal in each (Tq, Tk) matrix): the masked_fill form (1 = hide) mixed up.
void check_mask(const Tensor& mask, const ArrayShape& target, const char* op);

}  // namespace xgrad::nn::functional::detail
