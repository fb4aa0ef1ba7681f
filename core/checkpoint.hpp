// core/checkpoint.hpp — activation checkpointing: keep a function's inputs, drop its insides,
// recompute them in backward (how: core/checkpoint.cpp).
//
//   y = checkpoint(fn, x1, ..., xn)       y = fn(x1, ..., xn), the same values
//   memory: the graph keeps x1..xn and y, not the tensors fn made in between
//   time:   fn runs twice per training step (forward, and again inside backward)
//
// ref: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"; PyTorch docs,
// torch.utils.checkpoint.checkpoint (as its use_reentrant=False).
#pragma once

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

using CheckpointFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// y = fn(inputs), keeping only inputs (and the tensors fn read) for backward. inputs: any number
// of tensors of any shape; y: what fn returns. Throws ValueError naming checkpoint for an
// undefined input, an fn returning an undefined tensor, an fn that changes an input in place (its
// recomputation would see other values; the message names the input's position), or (in
// backward) a recomputed y of another shape than the forward's.
// It works when no input requires grad. Under no grad it is a plain call of fn, so a checkpoint
// nested inside fn runs its fn 3 times (outer forward, outer recomputation, its own backward).
// fn must compute the same values when called again, from its arguments, the parameters and the
// generator only (not a mode switched by train()/eval() in between, a counter, a clock), and
// change no state but the generator's. With several threads drawing from the generator at once,
// the replay is exact only if no other draws happen during fn. The gradients are the plain fn's,
// bit for bit where each parameter is read once and each input at most twice; a sparse Embedding
// inside fn gets a dense gradient.
Tensor checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);

namespace checkpoint_detail {
template <class F, std::size_t... I>
Tensor call(const F& fn, const std::vector<Tensor>& in, std::index_sequence<I...>) {
    return fn(in[I]...);
}
}  // namespace checkpoint_detail

// checkpoint(fn, x1, ..., xn) with fn(const Tensor&, ..., const Tensor&) -> Tensor.
template <class F, class... Ts>
Tensor checkpoint(F fn, const Tensor& first, const Ts&... rest) {
    static_assert((std::is_convertible_v<const Ts&, const Tensor&> && ...), "checkpoint: inputs are Tensors");
    CheckpointFn call = [fn = std::move(fn)](const std::vector<Tensor>& in) {
        return checkpoint_detail::call(fn, in, std::make_index_sequence<1 + sizeof...(Ts)>());
    };
    return checkpoint(call, std::vector<Tensor>{first, rest...});
}

}  // namespace xgrad
