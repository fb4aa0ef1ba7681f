// nn/lora_linear.cpp — functional::lora_linear: a Linear and its LoRA term in one op, forward and
// backward in gemms that accumulate into their outputs, so that no (R, out) array is passed over
// but by a product. The composed form it stands for is LoRA::apply (nn/lora.cpp), its oracle.
#include <xgrad/nn/lora.hpp>

#include <algorithm>
#include <utility>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/core/shape.hpp>

namespace xgrad::nn::functional {

// forward : H (R, r) = X Aᵀ,   Y (R, out) = b + X Wᵀ + s·H Bᵀ          R = x's leading dims flattened
// backward: T (R, r) = s·G B,   dX = G W + T A,   dW = Gᵀ X,   db = Σ_r G[r, :],
//           dA (r, in) = Tᵀ X,   dB (out, r) = s·Gᵀ H
// s is each gemm's alpha and the sums are its beta = 1: every pass over an (R, out) or (R, in)
// array is a product's own. H, (R, r), is the one array saved beside the inputs.
// ref: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", eq. (3)
Tensor lora_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& A, const Tensor& B,
                   real s) {
    const profiler::OpScope scope("lora_linear", x, weight, A, B, bias);
    for (const auto& [t, what] : {std::pair{&x, "the input"}, {&weight, "the weight"}, {&A, "A"}, {&B, "B"}})
        check_defined(*t, "lora_linear", what);
    const auto &xs = x.data().shape(), &ws = weight.data().shape();
    const auto &as = A.data().shape(), &bs = B.data().shape();
    check(ws.size() == 2 && as.size() == 2 && bs.size() == 2, "lora_linear",
          "weight, A and B must be 2-D; got {}, {} and {}", lazy_shape(ws), lazy_shape(as), lazy_shape(bs));
    const std::size_t out = ws[0], in = ws[1], r = as[0];
    check(as[1] == in && bs[0] == out && bs[1] == r, "lora_linear",
          "A {} and B {} do not fit the weight {}: A must be (r, {}) and B ({}, r)", lazy_shape(as),
          lazy_shape(bs), lazy_shape(ws), in, out);
    check(xs.size() >= 1 && xs.back() == in, "lora_linear", "input of shape {} does not end in in_features = {}",
          lazy_shape(xs), in);
    if (bias.defined())
        check(bias.dim() == 1 && bias.data().shape()[0] == out, "lora_linear",
              "bias of shape {} does not match ({},)", lazy_shape(bias.data().shape()), out);
    std::size_t R = 1;
    for (std::size_t i = 0; i + 1 < xs.size(); ++i) R *= xs[i];
    ArrayShape ys(xs.begin(), xs.end());
    ys.back() = out;
    const real* X = x.data().data();
    Array H(ArrayShape{R, r});
    gemm(false, true, R, r, in, 1, X, in, A.data().data(), in, 0, H.data(), r);
    Array y(ys);
    if (bias.defined())
        for (std::size_t i = 0; i < R; ++i) std::copy_n(bias.data().data(), out, y.data() + i * out);
    gemm(false, true, R, out, in, 1, X, in, weight.data().data(), in, bias.defined() ? 1 : 0, y.data(), out);
    gemm(false, true, R, out, r, s, H.data(), r, B.data().data(), r, 1, y.data(), out);

    std::vector<Tensor> inputs{x, weight, A, B};
    if (bias.defined()) inputs.push_back(bias);
    const bool rx = x.requires_grad(), rw = weight.requires_grad(), ra = A.requires_grad(),
               rb = B.requires_grad(), rbias = bias.defined() && bias.requires_grad();
    return make_result(
        std::move(y), "lora_linear", inputs,
        [x, weight, A, B, H = std::move(H), s, R, in, out, r, rx, rw, ra, rb, rbias,
         has_bias = bias.defined()](const Array& g, const Array&) {
            const real *G = g.data(), *X = x.data().data();
            Grads grads(has_bias ? 5 : 4);
            // A product over R = 0 rows leaves its output as it was (K = 0): start it at zero.
            const auto zeros = [](ArrayShape shape) { return Array(xt::zeros<real>(shape)); };
            Array T(ArrayShape{R, r});  // s·G B
            if (rx || ra) gemm(false, false, R, r, out, s, G, out, B.data().data(), r, 0, T.data(), r);
            if (rx) {
                Array dx(x.data().shape());
                gemm(false, false, R, in, out, 1, G, out, weight.data().data(), in, 0, dx.data(), in);
                gemm(false, false, R, in, r, 1, T.data(), r, A.data().data(), in, 1, dx.data(), in);
                grads[0] = std::move(dx);
            }
            if (rw) {  // a frozen base W (add_lora freezes it) skips this product
                Array dw = zeros({out, in});
                gemm(true, false, out, in, R, 1, G, out, X, in, 0, dw.data(), in);
                grads[1] = std::move(dw);
            }
            if (ra) {
                Array da = zeros({r, in});
                gemm(true, false, r, in, R, 1, T.data(), r, X, in, 0, da.data(), in);
                grads[2] = std::move(da);
            }
            if (rb) {
                Array db = zeros({out, r});
                gemm(true, false, out, r, R, s, G, out, H.data(), r, 0, db.data(), r);
                grads[3] = std::move(db);
            }
            if (rbias) {
                Array dbias = zeros({out});
                for (std::size_t i = 0; i < R; ++i)
                    for (std::size_t j = 0; j < out; ++j) dbias.data()[j] += G[i * out + j];
                grads[4] = std::move(dbias);
            }
            return grads;
        });
}

}  // namespace xgrad::nn::functional
