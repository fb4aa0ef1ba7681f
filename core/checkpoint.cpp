// core/checkpoint.cpp — fn under no grad in forward, again with grad in backward.
// Forward: fn runs under NoGradGuard while an InputRecorder (core/autograd.hpp) notes the tensors
// requiring grad it reads (the parameters, even through a view). y's one node, "checkpoint", has
// x1..xn and those as inputs, so the version checks refuse an optimizer step before backward.
// Backward: the generator's state of the forward is put back, fn runs again with grad on detached
// copies of x1..xn, xgrad::grad gives dL/dxi and dL/dparameter from dL/dy, and the generator's
// current state returns.
#include <xgrad/core/checkpoint.hpp>

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad {

namespace {

std::mt19937_64 generator_state() {
    std::lock_guard<std::mutex> lock(generator_mutex());
    return generator();
}

// Puts `replay` in the generator for its lifetime, then the state it found back (also when fn
// throws). The lock is held only while copying: fn's draws take it themselves.
class ReplayGenerator {
public:
    explicit ReplayGenerator(const std::mt19937_64& replay) {
        std::lock_guard<std::mutex> lock(generator_mutex());
        saved_ = generator();
        generator() = replay;
    }
    ~ReplayGenerator() {
        std::lock_guard<std::mutex> lock(generator_mutex());
        generator() = saved_;
    }
    ReplayGenerator(const ReplayGenerator&) = delete;
    ReplayGenerator& operator=(const ReplayGenerator&) = delete;

private:
    std::mt19937_64 saved_;
};

Tensor checked_output(Tensor y) {
    check(y.defined(), "checkpoint", "the function returned an undefined tensor");
    return y;
}

}  // namespace

Tensor checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
    const profiler::OpScope scope("checkpoint", inputs);
    check(bool(fn), "checkpoint", "the function is empty");
    for (std::size_t i = 0; i < inputs.size(); ++i)
        check(inputs[i].defined(), "checkpoint", "input {} of {} is an undefined tensor", i, inputs.size());
    if (!grad_enabled()) return checked_output(fn(inputs));  // no graph to save memory on

    // ---- forward: fn without a graph, noting what it reads --------------------------------------
    const std::mt19937_64 rng = generator_state();
    std::vector<std::uint64_t> versions;  // the inputs' versions before fn: fn must not change them
    for (const Tensor& x : inputs) versions.push_back(x.impl()->version);
    Tensor y;
    std::vector<Tensor> read;  // the tensors requiring grad that fn read: parameters, captured tensors
    {
        NoGradGuard no_grad;
        InputRecorder recorder;
        y = checked_output(fn(inputs));
        if (y.requires_grad()) recorder.add(y);  // fn returned a tensor from outside (a parameter) itself
        read = recorder.inputs();
    }
    if (read.empty()) return y;  // y depends on nothing requiring grad (the inputs included): a constant
    for (std::size_t i = 0; i < inputs.size(); ++i)
        check(inputs[i].impl()->version == versions[i], "checkpoint",
              "the function changed input {} of {} (shape {}) in place; backward runs it again on the changed "
              "values, which would give other gradients: let fn change a copy (x.detach()) instead",
              i, inputs.size(), lazy_shape(inputs[i].shape()));
    // The node's inputs: x1..xn, then what fn read (an input read is there twice; its second edge
    // gets no gradient)
    std::vector<Tensor> edges = inputs;
    edges.insert(edges.end(), read.begin(), read.end());
    // y's values become the node's output (moved, unless y is also held elsewhere)
    Array out = y.impl_ptr().use_count() == 1 ? std::move(y.impl()->data) : y.data();
    const Array::shape_type out_shape = out.shape();

    // ---- backward: fn again, with grad, from the same generator state ----------------------------
    // in the forward pass this was: y = fn(x1..xn) reading the parameters p1..pm;
    // so dL/dxi and dL/dpj are those of the recomputed graph, from dL/dy.
    auto backward = [fn, inputs, read, rng, out_shape](const Array& grad_out, const Array&) {
        std::vector<Tensor> wrt;  // detached copies of the inputs, then what fn read
        wrt.reserve(inputs.size() + read.size());
        for (const Tensor& x : inputs) {
            Tensor copy = x.detach();
            copy.requires_grad_(x.requires_grad());
            wrt.push_back(std::move(copy));
        }
        Tensor again;
        {
            EnableGradGuard grad_on;
            ReplayGenerator replay(rng);
            again = checked_output(fn(wrt));
        }
        check(again.data().shape() == out_shape, "checkpoint",
              "the recomputed output has shape {}, the forward's {}: fn must compute the same values from its "
              "inputs, parameters and the generator",
              lazy_shape(again.data().shape()), lazy_shape(out_shape));
        if (!again.requires_grad()) return Grads(inputs.size() + read.size());  // y depends on nothing requiring grad
        wrt.insert(wrt.end(), read.begin(), read.end());
        return grad(again, wrt, from_array(grad_out));  // one Grad per edge, in edge order
    };
    return make_result(std::move(out), "checkpoint", edges, std::move(backward));
}

}  // namespace xgrad
