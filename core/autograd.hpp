// core/autograd.hpp — the graph that reverse-mode autodiff walks, and how an op joins it.
//
// Every op that produces a tensor from inputs which require grad records one Node:
//
//     y = f(x1, ..., xn)        y->grad_fn = Node{ inputs = [x1, ..., xn], backward = ... }
//
// backward(grad_out, out) receives dL/dy (the shape of y) and y's own values, and returns
// dL/dxi for each input (the shape of xi), by the chain rule: dL/dxi = dL/dy · dy/dxi.
//
// Ownership runs one way only: output -> Node -> inputs. A backward closure captures the
// inputs and saved arrays it needs, never its own output (that would be a shared_ptr
// cycle, a leak); it gets the output's values through the `out` argument instead.
//
// Writing a new op (see core/ops.cpp for many):
//
//     Tensor square(const Tensor& x) {
//         Array y = x.data() * x.data();                       // forward
//         return make_result(std::move(y), "square", {x},
//             [x](const Array& grad_out, const Array&) {      // the handle: shares x's array
//                 return make_grads(Array(2 * x.data() * grad_out));  // dL/dx = 2x · dL/dy
//             });
//     }
//
// declare it in core/ops.hpp, and add a gradcheck test for it to tests/test_gradcheck_core.cpp
// (README.md, "Adding an op", walks through it).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace xgrad {

// One gradient per input, in input order. std::nullopt means "nothing to add for this
// input": it does not require grad, or the backward already accumulated into it directly
// (the row scatter of index_select and nn::Embedding does this).
using Grads = std::vector<std::optional<Array>>;
// Builds Grads from one gradient per input, moving each in. (Grads{std::move(g)} would copy g:
// the elements of a brace list are const. Every backward paid that extra array, bench/ W1.)
template <class... G>
Grads make_grads(G&&... grads) {
    Grads out;
    out.reserve(sizeof...(grads));
    (out.emplace_back(std::forward<G>(grads)), ...);
    return out;
}
using BackwardFn = std::function<Grads(const Array& grad_out, const Array& out)>;

// An input of a recorded op, with its version and shape when the op ran. Before a backward
// runs, the engine checks that every input still has both: a backward reads its inputs' arrays
// through these handles, so an array replaced or modified in between (through Tensor::data(),
// or by an optimizer step) would give wrong gradients, or run gemm on shapes it never checked.
// This is PyTorch's version counter ("one of the variables needed for gradient computation has
// been modified by an inplace operation"), with two differences:
//   * it is stricter: every input is checked, not only those an op saved (xgrad's ops keep
//     input handles, not saved copies), so changing b after y = a + b is an error too;
//   * an op's own output is checked only as the input of the ops that consumed it: reading an
//     output through a non-const handle (y.data()(0) in a test) counts as a change, and checking
//     outputs themselves made that common read an error. A change to y made before any op
//     consumed it is therefore not seen by the backward of the op that made y. Its SHAPE is
//     checked (Node::out_shape): every backward assumes grad_out has the output's shape, and an
//     output array replaced by a smaller one made gelu, narrow or dropout read past grad_out.
struct NodeInput {
    std::shared_ptr<TensorImpl> tensor;
    std::uint64_t version = 0;
    Array::shape_type shape;  // inline storage up to 4 dims: recording it allocates nothing
};

struct Node {
    std::string name;                                  // the op: "mul", "matmul", ...
    std::vector<NodeInput> inputs;                     // the tensors this op read
    Array::shape_type out_shape;                       // the output's shape when the op ran
    BackwardFn backward;                               // null once released
    bool released = false;                             // saved arrays freed after a backward

    // Scratch of one backward pass (core/autograd.cpp), cleared when it ends: whether the
    // topological sort reached this node, and dL/d(output) summed so far over the output's
    // consumers. Fields here rather than hash tables keyed by tensor, whose allocations were
    // 40% of those of a small training step (bench/, W1).
    bool visited = false;
    std::optional<Array> grad_sum;

    ~Node();  // iterative, so that freeing a 100,000-op chain cannot overflow the stack
};

// ---- grad mode ------------------------------------------------------------------------------
// While a NoGradGuard lives (RAII, per thread), ops record no graph: used by optimizers'
// updates, evaluation loops and gradcheck's finite differences.
bool grad_enabled();
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool prev_;
};

// ---- anomaly mode -----------------------------------------------------------------------------
// While a DetectAnomalyGuard lives (RAII, per thread, like NoGradGuard), every op's forward
// output and every gradient a backward returns is checked for NaN and ±inf, and the first one
// found throws ValueError naming the op ("anomaly: op 'log' produced NaN in its forward output
// of shape (2,) at flat index 0"). A forward output's ±inf counts only if the op produced it: an
// inf an input already held and the op passed on is not flagged again (a -inf attention mask
// flows through softmax's x - max), and masked_fill's ±inf fill is intended. Off, it costs one
// branch per op. As torch.autograd's
// detect_anomaly / set_detect_anomaly; DetectAnomalyGuard(false) turns it off for a scope.
bool anomaly_enabled();
void set_detect_anomaly(bool on);
class DetectAnomalyGuard {
public:
    explicit DetectAnomalyGuard(bool on = true);
    ~DetectAnomalyGuard();
    DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
    DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

private:
    bool prev_;
};

// ---- building ops -----------------------------------------------------------------------------
// Wraps the forward result `out`. If grad mode is on and any input requires grad, the result
// requires grad and gets a Node with `backward`; otherwise `backward` is dropped unused.
// Ops pass their inputs as a brace list, {x} or {a, b}, which costs no allocation; a vector
// serves ops with a variable number of inputs (linear's optional bias, concat).
Tensor make_result(Array out, const char* name, std::initializer_list<Tensor> inputs, BackwardFn backward);
Tensor make_result(Array out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward);

// Adds `g` into a leaf's dense .grad (allocating zeros on first use). Throws ValueError naming
// both shapes when they differ. A row-sparse gradient already held is added in and dropped:
// sparse + dense is dense (a sparse table tied to an output head, nn/tying.hpp). Public so
// that ops with a sparse backward can accumulate directly (nn::Embedding).
void accumulate_grad(TensorImpl& leaf, Array g);

// Runs reverse-mode autodiff from `root` (what Tensor::backward calls).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// ---- inspecting a graph -----------------------------------------------------------------------
// Calls visit(t) once for every tensor the graph below `root` keeps alive: root itself, then
// every input of every Node reachable from it (leaves included), depth first, with an explicit
// stack (deep graphs are fine). t.grad_fn is the op that made t, null for a leaf; t.data.size()
// · sizeof(real) its bytes. Changes nothing. Arrays a backward closure saved beyond its inputs
// (a softmax's probabilities, say) are not tensors and are not visited. Used for reports of
// the memory a graph holds for backward (examples/gpt).
void visit_graph(const Tensor& root, const std::function<void(const TensorImpl& t)>& visit);

}  // namespace xgrad
