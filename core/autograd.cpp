// core/autograd.cpp — the engine: how an op joins the graph, and the backward pass.
//
// make_result records y = f(x1, ..., xn) as a Node (core/autograd.hpp). backward(L) then computes
// dL/dp for every leaf p that requires grad:
//   1. Sort the graph below L topologically, with an explicit stack (no recursion): every node
//      comes after all the nodes that consume its output.
//   2. Seed dL/dL = 1 (or the given gradient), then run each node's backward exactly once,
//      after all contributions to its output are summed (x*x, x + x, diamonds).
//   3. Add what reaches a leaf into leaf.grad (+=, dense or row-sparse), so gradients accumulate
//      across backward() calls until zero_grad(): core/accumulate.cpp, the one writer of .grad.
//   4. Unless retain_graph, free each closure (and its saved arrays) right after it runs.
// Anomaly mode (core/anomaly.cpp) checks outputs and gradients; core/graph.cpp frees the graph.
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/detail/accumulate.hpp>
#include <xgrad/core/detail/anomaly.hpp>
#include <xgrad/core/detail/fork.hpp>
#include <xgrad/core/profiler.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace xgrad {

// ---- grad mode --------------------------------------------------------------------------------
namespace {
thread_local bool g_grad_enabled = true;
}
bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { g_grad_enabled = prev_; }

// ---- the input recorder -------------------------------------------------------------------------
namespace {
thread_local InputRecorder* g_recorder = nullptr;  // the innermost live InputRecorder, or none
}
InputRecorder::InputRecorder() : prev_(g_recorder) { g_recorder = this; }
InputRecorder::~InputRecorder() { g_recorder = prev_; }
void InputRecorder::add(const Tensor& t) {
    for (const Tensor& seen : inputs_)
        if (seen.impl() == t.impl()) return;
    inputs_.push_back(t);
}

// ---- recording an op --------------------------------------------------------------------------
namespace {
Tensor make_result(Array out, const char* name, const Tensor* inputs, std::size_t n, BackwardFn backward) {
    for (std::size_t i = 0; i < n; ++i)
        if (inputs[i].defined()) check_parameter_shape(*inputs[i].impl(), name);
    if (anomaly_enabled()) check_finite(out, name, "its forward output", inputs, n);
    bool any = false;
    for (std::size_t i = 0; i < n; ++i) any = any || inputs[i].requires_grad();
    if (g_recorder && any)
        for (std::size_t i = 0; i < n; ++i)
            if (inputs[i].requires_grad()) g_recorder->add(inputs[i]);
    if (profiler::detail::active()) profiler::detail::note_result(name, out.size());  // an elementwise op's FLOPs
    auto impl = std::make_shared<TensorImpl>(std::move(out));
    if (any && grad_enabled()) {
        auto node = std::make_shared<Node>();
        node->name = name;
        node->inputs.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto& in = inputs[i].impl_ptr();
            node->inputs.push_back({in, in->version, in->data.shape()});
        }
        node->out_shape = impl->data.shape();
        node->out_version = impl->version;
        node->backward = std::move(backward);
        impl->requires_grad = true;
        impl->grad_fn = std::move(node);
    }
    return Tensor(std::move(impl));
}
}  // namespace

Tensor make_result(Array out, const char* name, std::initializer_list<Tensor> inputs, BackwardFn backward) {
    return make_result(std::move(out), name, inputs.begin(), inputs.size(), std::move(backward));
}

Tensor make_result(Array out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward) {
    return make_result(std::move(out), name, inputs.data(), inputs.size(), std::move(backward));
}

// ---- fork() and the nodes' locks ----------------------------------------------------------------
// A node's mutex is held while its backward runs; fork() copies only the calling thread, so a
// node another thread was running would stay locked in the child. The threads inside a node's
// backward are counted, and fork() holds new ones back and waits for the others to leave: all
// but those that are themselves forking from inside a backward (core/detail/fork.hpp gives the
// order of the steps). A nested backward (checkpoint's recomputation) counts once: holding it
// back would wait for itself.
namespace {
std::atomic<int> g_in_backward{0};       // threads inside a node's backward
std::atomic<int> g_forking{0};           // fork() calls holding new backwards back
std::atomic<int> g_forking_inside{0};    // fork() calls made from inside a backward (counted above)
thread_local int t_backward_depth = 0;
thread_local bool t_forking_inside = false;

void wait_for_fork_a_little() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }
}  // namespace

namespace xgrad_detail {
void backward_fork_announce() {
    t_forking_inside = t_backward_depth > 0;
    if (t_forking_inside) g_forking_inside.fetch_add(1);
}
void backward_fork_hold() {
    g_forking.fetch_add(1);  // seq_cst, as the counting below: one of the two sees the other
    while (g_in_backward.load() != g_forking_inside.load()) wait_for_fork_a_little();
}
void backward_fork_release_in_parent() {
    g_forking.fetch_sub(1);
    if (t_forking_inside) g_forking_inside.fetch_sub(1);
}
void backward_fork_reset_in_child() {
    g_forking.store(0);
    g_forking_inside.store(0);
    g_in_backward.store(t_backward_depth > 0 ? 1 : 0);  // the other threads are not in the child
}
}  // namespace xgrad_detail

namespace {
// Counts this thread in g_in_backward for its lifetime, first waiting out a fork() in progress.
class InBackward {
public:
    InBackward() {
        xgrad_detail::register_fork_handler();
        if (t_backward_depth++ > 0) return;
        for (;;) {
            g_in_backward.fetch_add(1);
            if (g_forking.load() == 0) return;
            g_in_backward.fetch_sub(1);
            while (g_forking.load() != 0) wait_for_fork_a_little();
        }
    }
    ~InBackward() {
        if (--t_backward_depth == 0) g_in_backward.fetch_sub(1);
    }
    InBackward(const InBackward&) = delete;
    InBackward& operator=(const InBackward&) = delete;
};
}  // namespace

// ---- the backward pass --------------------------------------------------------------------------
namespace {
using xgrad_detail::Source;

[[noreturn]] void throw_released(const Node& node) {
    throw ValueError("backward: trying to backward through the graph a second time (op '" + node.name +
                     "'); its saved arrays were freed after the first backward. Pass retain_graph=true "
                     "to the first backward() if you need to backward twice.");
}

// Where grad() sends the gradients of the tensors it was asked about, instead of into .grad. The
// pass treats them as leaves: it stops there.
struct Capture {
    std::unordered_map<const TensorImpl*, std::size_t> index;  // wanted tensor → its slot
    std::vector<std::optional<Array>> sums;                     // dL/d(wanted), summed
    bool wants(const TensorImpl* t) const { return index.count(t) > 0; }
};

// Post-order DFS from the root with an explicit stack: non-leaf tensors, each after all its
// inputs, and each node's position in `pos`. Throws before any gradient is touched if part of the
// graph was freed. The marks live in this call's `visited`, never in the shared graph.
std::vector<TensorImpl*> topological_order(TensorImpl* root, std::unordered_map<const Node*, std::size_t>& pos,
                                           const Capture* capture) {
    std::unordered_set<const Node*> visited{root->grad_fn.get()};
    std::vector<std::pair<TensorImpl*, std::size_t>> stack{{root, 0}};  // (tensor, next input)
    std::vector<TensorImpl*> sorted;
    sorted.reserve(16);
    while (!stack.empty()) {
        auto& [t, next] = stack.back();
        Node* node = t->grad_fn.get();
        if (node->released.load(std::memory_order_acquire)) throw_released(*node);
        if (next < node->inputs.size()) {
            TensorImpl* in = node->inputs[next++].tensor.get();
            if (in->grad_fn && in->requires_grad && !(capture && capture->wants(in)) &&
                visited.insert(in->grad_fn.get()).second)
                stack.push_back({in, 0});
        } else {
            pos.emplace(node, sorted.size());
            sorted.push_back(t);
            stack.pop_back();
        }
    }
    return sorted;
}

// Throws unless every input of `node` still has the version and shape it had when the op ran:
// the backward is about to read them. See NodeInput in core/autograd.hpp.
void check_unmodified(const Node& node) {
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        const NodeInput& in = node.inputs[i];
        const TensorImpl& t = *in.tensor;
        if (t.version == in.version && t.data.shape() == in.shape) continue;
        check(t.version != in.version, "backward",
              "input {}{} of op '{}', of shape {} when the op ran, is now of shape {} at the same version: "
              "it was resized through a reference from mutable_data() held across the forward; take "
              "mutable_data() right where you write, or resize with set_data()",
              i, t.param_name.empty() ? std::string() : " (parameter '" + t.param_name + "')", node.name,
              lazy_shape(in.shape), lazy_shape(t.data.shape()));
        throw ValueError(fmt::format(
            "backward: one of the variables needed for gradient computation has been modified by an "
            "inplace operation: input {}{} of op '{}', of shape {} when the op ran, is now of shape {} "
            "at version {} (expected version {}). It was changed (through Tensor::mutable_data() or "
            "set_data(), by an optimizer step, or, for a gradient used in an op, by a later backward's "
            "accumulation, zero_grad(false) or clip_grad_norm_) between the forward and this backward; "
            "run the forward again after changing it.",
            i, t.param_name.empty() ? std::string() : " (parameter '" + t.param_name + "')", node.name,
            shape_str(in.shape), shape_str(t.data.shape()), t.version, in.version));
    }
}

// dL/d(root) as run_backward and grad() receive it: `gradient` checked against root's shape, or
// ones for a one-element root. `op` names the caller in messages.
Array seed_of(const Tensor& root, const Tensor& gradient, const char* op) {
    check(root.defined(), op, "called on an undefined tensor");
    check(root.requires_grad(), op, "the tensor of shape {} does not require grad and has no grad_fn",
          shape_str(root.shape()));
    if (gradient.defined()) {
        check(gradient.shape() == root.shape(), op, "gradient of shape {} does not match the output's shape {}",
              shape_str(gradient.shape()), shape_str(root.shape()));
        return Array();  // read in place from `gradient` (no copy)
    }
    check(root.numel() == 1, op,
          "a gradient can be created implicitly only for a one-element output; the output "
          "has shape {}, so pass backward(gradient) with that shape",
          shape_str(root.shape()));
    return xt::ones<real>(root.data().shape());
}

// Steps 1, 2 and 4 of the pass from r (which has a grad_fn). Gradients reaching a leaf go into its
// .grad (step 3), or, with a capture, into the capture's sums for the tensors it wants, and nowhere
// for the others.
void backward_pass(TensorImpl* r, const Array& root_grad, bool retain_graph, Capture* capture) {
    // This call's scratch: the order, and dL/d(output) summed so far over each output's consumers.
    std::unordered_map<const Node*, std::size_t> pos;
    const std::vector<TensorImpl*> order = topological_order(r, pos, capture);
    std::vector<std::optional<Array>> sums(order.size());  // (an empty Array would hold 1 element)
    for (std::size_t k = order.size(); k-- > 0;) {
        TensorImpl* t = order[k];
        if (t != r && !sums[k]) continue;  // nothing flowed here
        const std::optional<Array> summed = std::move(sums[k]);
        const Array& grad_out = t == r ? root_grad : *summed;

        Node& node = *t->grad_fn;
        check(t->data.shape() == node.out_shape, "backward",
              "the output of op '{}', of shape {} when the op ran, was replaced by an array of shape {} "
              "(through Tensor::mutable_data() or set_data()) before this backward; run the forward again after changing it",
              node.name, lazy_shape(node.out_shape), lazy_shape(t->data.shape()));
        check(t->version == node.out_version, "backward",
              "the output of op '{}' (shape {}) was modified in place (through Tensor::mutable_data() or "
              "set_data()) after the op ran: version {}, expected {}; its backward would use the new values. "
              "Run the forward again after changing it",
              node.name, lazy_shape(node.out_shape), t->version, node.out_version);
        Grads in_grads;
        {
            // One backward at a time per node: threads sharing a retained graph take turns here.
            InBackward counted;  // before the lock: a thread waiting for a fork holds no node's lock
            std::lock_guard<std::mutex> lock(node.mutex);
            if (node.released.load(std::memory_order_relaxed)) throw_released(node);
            check_unmodified(node);
            const profiler::detail::Scope event{profiler::detail::active()  // "<op> backward", while profiling
                                                    ? profiler::detail::begin(node.name + " backward", profiler::Kind::backward)
                                                    : profiler::detail::Handle{}};
            in_grads = node.backward(grad_out, t->data);
            if (!retain_graph) {
                node.backward = nullptr;  // frees every array the closure saved
                node.released.store(true, std::memory_order_release);
            }
        }
        check(in_grads.size() == node.inputs.size(), "backward",
              "op '{}' returned {} gradients for {} inputs", node.name, in_grads.size(),
              node.inputs.size());
        for (std::size_t i = 0; i < in_grads.size(); ++i) {
            TensorImpl* in = node.inputs[i].tensor.get();
            if (!in_grads[i] || !in->requires_grad) continue;
            Grad& g = *in_grads[i];
            if (anomaly_enabled())
                check_finite(grad_values(g), node.name, fmt::format("its backward's gradient for input {}", i).c_str());
            const Source source{node.name.c_str(), static_cast<std::ptrdiff_t>(i)};
            if (capture && capture->wants(in)) {
                check_new(g, in->data.shape(), "backward", source);
                add_to_sum(capture->sums[capture->index.at(in)], std::move(g), in->data.shape());
            } else if (!in->grad_fn) {
                const profiler::RecordFunction event("accumulate_grad", profiler::Kind::engine);
                if (!capture) accumulate_leaf(*in, std::move(g), "backward", source);
            } else {
                check_new(g, in->data.shape(), "backward", source);
                add_to_sum(sums[pos.at(in->grad_fn.get())], std::move(g), in->data.shape());
            }
        }
    }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
    const Array seed = seed_of(root, gradient, "backward");
    const Array& root_grad = gradient.defined() ? gradient.data() : seed;
    TensorImpl* r = root.impl();
    const profiler::LaneGuard lane(profiler::Lane::backward);  // the trace's backward lane
    const profiler::RecordFunction event("backward", profiler::Kind::engine);
    if (!r->grad_fn) {  // backward on a leaf: dL/dL
        accumulate_leaf(*r, Array(root_grad), "backward", Source{"backward() on a leaf"});
        return;
    }
    backward_pass(r, root_grad, retain_graph, nullptr);
}

Grads grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output, bool retain_graph) {
    const Array seed = seed_of(output, grad_output, "grad");
    const Array& root_grad = grad_output.defined() ? grad_output.data() : seed;
    Capture capture;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        check(inputs[i].defined(), "grad", "input {} is an undefined tensor", i);
        capture.index.emplace(inputs[i].impl(), i);  // a repeated input keeps its first slot
    }
    capture.sums.resize(inputs.size());
    TensorImpl* r = output.impl();
    const profiler::LaneGuard lane(profiler::Lane::backward);
    const profiler::RecordFunction event("grad", profiler::Kind::engine);
    if (capture.wants(r)) capture.sums[capture.index.at(r)] = root_grad;  // dL/d(output) itself
    else if (r->grad_fn) backward_pass(r, root_grad, retain_graph, &capture);
    Grads out(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::size_t first = capture.index.at(inputs[i].impl());
        if (!inputs[i].requires_grad()) continue;
        if (first == i && capture.sums[i]) out[i] = Grad(std::move(*capture.sums[i]));
        else if (first < i && out[first]) out[i] = Grad(Array(grad_values(*out[first])));  // a repeated input
    }
    return out;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    run_backward(*this, gradient, retain_graph);
}

}  // namespace xgrad
