// nn/loss.hpp — the losses (torch.nn.functional): cross_entropy, nll_loss, mse_loss,
// binary_cross_entropy_with_logits.
//
// Legend: N rows (examples or tokens), C classes, B batch, T time. Losses are in nats. The
// "fused" ones compute their own backward (math in nn/loss.cpp).
#pragma once

#include <cstdint>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {

// How a per-element loss is reduced, as PyTorch's `reduction=` argument.
enum class Reduction { Mean, Sum, None };

namespace functional {

// cross_entropy's and nll_loss's options; setters chain, as LibTorch's:
//   cross_entropy(logits, y, CrossEntropyOptions().ignore_index(0).label_smoothing(0.1))
class CrossEntropyOptions {
public:
    CrossEntropyOptions& reduction(Reduction v) { reduction_ = v; return *this; }
    CrossEntropyOptions& ignore_index(std::int64_t v) { ignore_index_ = v; return *this; }
    CrossEntropyOptions& label_smoothing(double v) { label_smoothing_ = v; return *this; }

    Reduction reduction() const { return reduction_; }              // (Mean)
    std::int64_t ignore_index() const { return ignore_index_; }     // its targets count nothing (-100)
    double label_smoothing() const { return label_smoothing_; }     // in [0, 1] (0)

private:
    Reduction reduction_ = Reduction::Mean;
    std::int64_t ignore_index_ = -100;
    double label_smoothing_ = 0.0;
};

// Softmax cross-entropy, fused. logits (N, C) with targets (N,), or (B, T, C) with (B, T): the
// class dim is LAST (llm.c's layout; PyTorch wants (B, C, T)). Returns () or, for None, the
// targets' shape. Nats.
// Mean divides by the non-ignored targets; all ignored gives 0 (PyTorch: nan) and gradient 0.
// Throws IndexError for a target outside [0, C) other than ignore_index (value, position, C),
// ValueError for mismatched shapes or label_smoothing outside [0, 1]. Non-finite logits give
// PyTorch's values (nan logit: nan row; -inf target logit: +inf).
// ref: PyTorch docs, torch.nn.functional.cross_entropy
Tensor cross_entropy(const Tensor& logits, const IndexTensor& targets, const CrossEntropyOptions& options = {});

// Negative log-likelihood of log-probabilities (e.g. log_softmax output), same shapes,
// options and errors as cross_entropy (label_smoothing must be 0).
Tensor nll_loss(const Tensor& log_probs, const IndexTensor& targets, const CrossEntropyOptions& options = {});

// Mean squared error (input - target)², reduced; the same shapes; the mean of nothing is 0.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// Binary cross-entropy on logits, fused and stable: ℓ = -[y log σ(x) + (1-y) log(1-σ(x))].
// logits and targets (probabilities in [0, 1], no gradient) have the same shape. Throws
// ValueError for a target outside [0, 1] (value and position) or mismatched shapes. The mean
// of an empty input is 0.
// ref: PyTorch docs, torch.nn.functional.binary_cross_entropy_with_logits
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        Reduction reduction = Reduction::Mean);

}  // namespace functional
}  // namespace xgrad::nn
