// core/autograd.hpp — the graph that reverse-mode autodiff walks, and how an op joins it.
//
// An op producing y = f(x1, ..., xn) from inputs that require grad records one Node, y->grad_fn,
// holding the inputs and a backward closure. backward(grad_out, out) receives dL/dy (y's shape)
// and y's values, and returns dL/dxi = dL/dy · dy/dxi for each input (the chain rule).
//
// Ownership runs one way: output -> Node -> inputs. A closure captures the inputs and arrays it
// needs, never its own output (a shared_ptr cycle, a leak); it reads y through `out` instead.
// An op written out: README.md, "Adding an op".
//
// The engine: core/autograd.cpp (make_result, the backward pass, grad()). A backward only returns
// gradients; core/accumulate.cpp is the one writer of .grad.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad {

// ---- what a backward returns ------------------------------------------------------------------
// The gradient of a row gather (index_select, embedding) of a table (V, d...): n rows, one per
// lookup, at `indices` (n,), duplicates allowed (they sum), in any order. Never a (V, d...) array.
//   keep_sparse = true : a leaf keeps it row-sparse, coalesced (Embedding(sparse=true); 2-D only)
//   keep_sparse = false: it is scatter-added into the leaf's dense .grad (the default Embedding)
struct RowSparseGrad {
    std::vector<std::int64_t> indices;  // (n,) rows of the table
    Array rows;                         // (n, d...)
    bool keep_sparse = false;
};

// dL/dx for one input: a dense array of x's shape (what almost every op returns; the implicit
// conversion lets a backward return a plain Array), or a RowSparseGrad of x's rows.
struct Grad {
    Grad(Array dense) : value(std::move(dense)) {}
    Grad(RowSparseGrad rows) : value(std::move(rows)) {}
    std::variant<Array, RowSparseGrad> value;
};

// One gradient per input, in input order; std::nullopt where an input gets nothing.
using Grads = std::vector<std::optional<Grad>>;
// Builds Grads from one gradient per input, moving each in (a brace list would copy them).
template <class... G>
Grads make_grads(G&&... grads) {
    Grads out;
    out.reserve(sizeof...(grads));
    (out.emplace_back(std::forward<G>(grads)), ...);
    return out;
}
using BackwardFn = std::function<Grads(const Array& grad_out, const Array& out)>;

// An input of a recorded op, with its version and shape when the op ran. Before a backward
// runs, the engine checks both: the closure reads its inputs through these handles, so an array
// changed in between (Tensor::mutable_data(), an optimizer step) would give wrong gradients. PyTorch's
// version counter, stricter: every input is checked, not only saved ones. An op's output is
// checked too, for its version and shape (Node::out_version, out_shape): a backward may read it,
// and every backward assumes grad_out has that shape.
struct NodeInput {
    std::shared_ptr<TensorImpl> tensor;
    std::uint64_t version = 0;
    Array::shape_type shape;
};

// A Node holds no state of a backward pass: each run_backward keeps its own (the order, the
// gradients summed per output), so several threads may backward through one retained graph.
struct Node {
    std::string name;                                  // the op: "mul", "matmul", ...
    std::vector<NodeInput> inputs;                     // the tensors this op read
    Array::shape_type out_shape;                       // the output's shape when the op ran
    std::uint64_t out_version = 0;                     // the output's version when the op ran
    BackwardFn backward;                               // null once released
    std::atomic<bool> released{false};                 // saved arrays freed after a backward
    std::mutex mutex;                                  // held while backward runs or is released;
                                                       // fork() waits for it (core/autograd.cpp)

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
// The converse, torch.enable_grad: ops record again inside a NoGradGuard's scope (checkpoint).
class EnableGradGuard {
public:
    EnableGradGuard();
    ~EnableGradGuard();
    EnableGradGuard(const EnableGradGuard&) = delete;
    EnableGradGuard& operator=(const EnableGradGuard&) = delete;

private:
    bool prev_;
};

// ---- anomaly mode (core/anomaly.cpp) -----------------------------------------------------------
// While a DetectAnomalyGuard lives (RAII, per thread), every forward output and every gradient a
// backward returns is checked for NaN and ±inf; the first throws ValueError naming the op. A ±inf
// an input already held and the op passed on is not flagged (a -inf attention mask). As
// torch.autograd.detect_anomaly.
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
Tensor make_result(Array out, const char* name, std::initializer_list<Tensor> inputs, BackwardFn backward);
Tensor make_result(Array out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward);

// Runs reverse-mode autodiff from `root` (what Tensor::backward calls).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// dL/d(inputs[i]) from dL/d(output) = grad_output (undefined: ones, for one element), as
// torch.autograd.grad(output, inputs, grad_output, allow_unused=True). Writes no .grad: one per
// input, std::nullopt where nothing flowed, row-sparse ones dense; the pass stops at the inputs.
// Throws ValueError when output is undefined or needs no grad, or grad_output's shape differs.
Grads grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
           bool retain_graph = false);

// ---- recording what a computation reads ------------------------------------------------------
// While an InputRecorder lives (RAII, per thread; the innermost one records), make_result adds to
// it every input requiring grad that an op reads, once each, in first-read order. Under a
// NoGradGuard that is what the code read from outside: the parameters (core/checkpoint.hpp).
class InputRecorder {
public:
    InputRecorder();
    ~InputRecorder();
    InputRecorder(const InputRecorder&) = delete;
    InputRecorder& operator=(const InputRecorder&) = delete;
    const std::vector<Tensor>& inputs() const { return inputs_; }
    void add(const Tensor& t);  // called by make_result

private:
    InputRecorder* prev_;
    std::vector<Tensor> inputs_;
};

// ---- a leaf's gradient: the only functions that write .grad and sparse_grad (core/accumulate.cpp)
// Each throws ValueError, before any write, when the gradient held or the new one does not fit
// the leaf's current shape, or a row index is out of [0, V).
void set_leaf_grad(TensorImpl& leaf, Grad g);  // replaces the gradient (Tensor::set_grad)
void clear_grad(TensorImpl& leaf);             // drops it: zero_grad(set_to_none=true)
void zero_grad_(TensorImpl& leaf);             // dense: zeros in place; row-sparse: k = 0 rows
void scale_grad_(TensorImpl& leaf, real c);    // g ← c·g (clip_grad_norm_)

// ---- inspecting a graph (core/graph.cpp) -----------------------------------------------------
// Calls visit(t) once for every tensor the graph below `root` keeps alive (root, then every
// input of every reachable Node, leaves included), with an explicit stack. Arrays a closure saved
// beyond its inputs are not visited. Used for reports of a graph's memory (examples/gpt).
void visit_graph(const Tensor& root, const std::function<void(const TensorImpl& t)>& visit);

}  // namespace xgrad
