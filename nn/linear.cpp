// nn/linear.cpp — functional::linear (forward and backward, one gemm each), then the Linear
// module: its parameters, their initialisation, and a forward that calls functional::linear.
#include <xgrad/nn/linear.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/nn/lora.hpp>

namespace xgrad::nn {

namespace functional {

namespace {
// The least work handed to a second thread, in values: so many rows of y to fill with b, or
// columns of G to sum, as hold this many (a split costs more than a few thousand values' work).
constexpr std::size_t kGrainValues = 16384;
std::size_t grain(std::size_t values_per_item) {
    return std::max<std::size_t>(1, kGrainValues / std::max<std::size_t>(1, values_per_item));
}
}  // namespace

// ---- linear (fused matmul + bias) ----------------------------------------------------------------
// forward : Y (R, out) = X (R, in) · Wᵀ + b,      R = all leading dims of x flattened
// backward: dX (R, in) = G (R, out) · W,   dW (out, in) = Gᵀ · X (R, in),   db (out) = Σ_r G[r, :]
// Fused so that each is one gemm with W transposed in place (no Wᵀ copy).
// ref: PyTorch docs, torch.nn.functional.linear
// Empty sizes: R = 0 gives an empty y and dW = 0; in = 0 gives y = b (gemm's beta·C when K = 0).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const profiler::OpScope scope("linear", x, weight, bias);
    check_defined(x, "linear", "the input");
    check_defined(weight, "linear", "the weight");
    const auto& ws = weight.data().shape();
    const auto& xs = x.data().shape();
    check(ws.size() == 2, "linear", "weight must be (out, in); got shape {}", lazy_shape(ws));
    const std::size_t out = ws[0], in = ws[1];
    check(xs.size() >= 1 && xs.back() == in, "linear",
          "input of shape {} does not end in in_features = {} (weight {})", lazy_shape(xs), in, lazy_shape(ws));
    if (bias.defined())
        check(bias.dim() == 1 && bias.data().shape()[0] == out, "linear", "bias of shape {} does not match ({},)",
              lazy_shape(bias.data().shape()), out);
    std::size_t R = 1;  // product of the leading dims (not numel / in, which fails for in = 0)
    for (std::size_t i = 0; i + 1 < xs.size(); ++i) R *= xs[i];
    ArrayShape ys(xs.begin(), xs.end());
    ys.back() = out;
    // With a bias, y starts as b in every row and gemm adds X·Wᵀ to it (beta = 1): one pass over y
    // fewer than zeroing it (gemm's beta = 0), then adding b.
    Array y(ys);
    if (bias.defined()) {
        const real* b = bias.data().data();
        parallel_for(R, grain(out), [&](std::size_t r0, std::size_t r1) {
            for (std::size_t r = r0; r < r1; ++r) std::copy_n(b, out, y.data() + r * out);
        });
    }
    gemm(false, true, R, out, in, 1, x.data().data(), in, weight.data().data(), in, bias.defined() ? 1 : 0,
         y.data(), out);
    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    return make_result(
        std::move(y), "linear", inputs,
        [x, weight, R, in, out, has_bias = bias.defined(), rx = x.requires_grad(),
         rw = weight.requires_grad(), rb = bias.defined() && bias.requires_grad()](const Array& g, const Array&) {
            const Array& X = x.data();
            const Array& W = weight.data();
            Grads grads(has_bias ? 3 : 2);
            if (rx) {
                Array dx(X.shape());
                gemm(false, false, R, in, out, 1, g.data(), out, W.data(), in, 0, dx.data(), in);
                grads[0] = std::move(dx);
            }
            if (rw) {  // a frozen W (LoRA's base, nn/lora.hpp) skips this product and its (out, in) array
                Array dw(W.shape());
                if (R == 0) dw.fill(0);
                gemm(true, false, out, in, R, 1, g.data(), out, X.data(), in, 0, dw.data(), in);
                grads[1] = std::move(dw);
            }
            if (rb) {
                // db[j] = Σ_r G[r, j], rows in order: each thread sums its own columns
                Array db = xt::zeros<real>({out});
                real* pdb = db.data();
                const real* pg = g.data();
                parallel_for(out, grain(R), [&](std::size_t j0, std::size_t j1) {
                    for (std::size_t r = 0; r < R; ++r)
                        for (std::size_t j = j0; j < j1; ++j) pdb[j] += pg[r * out + j];
                });
                grads[2] = std::move(db);
            }
            return grads;
        });
}

}  // namespace functional

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias)
    : in_(in_features), out_(out_features), has_bias_(with_bias) {
    check(in_ > 0 && out_ > 0, "Linear", "in_features and out_features must be positive; got ({}, {})", in_,
          out_);
    check(std::uint64_t(in_) <= kMaxNumel / std::uint64_t(out_), "Linear",
          "a ({}, {}) weight is too large: more than 2^60 elements", out_, in_);
    // U(-k, k), k = 1/√in:  u ~ U[0, 1)  →  (2u - 1)·k
    const real k = real(1) / std::sqrt(static_cast<real>(in_));
    auto uniform = [k](const Shape& shape) {
        Tensor t = rand(shape);
        t.mutable_data() = (2 * t.data() - 1) * k;
        return t;
    };
    weight = register_parameter("weight", uniform({out_, in_}));
    if (with_bias) bias = register_parameter("bias", uniform({out_}));
}

}  // namespace xgrad::nn

namespace xgrad::nn {

// forward reads the public members, the optimizer and save() the registered tensors: the same handles.
Tensor Linear::forward(const Tensor& x) const {
    check(weight.impl() == registered_parameter("weight").impl(), "Linear",
          "the member 'weight' is no longer the registered parameter (was it reassigned, as in "
          "`head->weight = emb->weight`?); the optimizer and state_dict() still hold the registered "
          "tensor, so this forward would read a tensor that is never trained. To share an "
          "Embedding's table use nn::tie_weights(head, table); to set values, write through weight.mutable_data() or nn::init");
    check(has_bias_ ? bias.impl() == registered_parameter("bias").impl() : !bias.defined(), "Linear",
          "the member 'bias' is no longer the registered parameter (was it reassigned?); the optimizer "
          "and state_dict() hold the registered one, so it would never be trained; to set values, "
          "write through bias.mutable_data() or nn::init");
    return lora_ ? lora_->forward(x, weight, bias) : functional::linear(x, weight, bias);
}

void Linear::check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const {
    if (lora_) lora_->check_state(path, loading, op);
}

}  // namespace xgrad::nn
