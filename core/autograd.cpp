// core/autograd.cpp — the backward pass: topological order, chain rule, accumulation.
//
// backward(L) computes dL/dp for every leaf p that requires grad:
//   1. Sort the graph below L topologically, with an explicit stack (no recursion): every node
//      comes after all the nodes that consume its output.
//   2. Seed dL/dL = 1 (or the given gradient), then run each node's backward exactly once,
//      after all contributions to its output are summed (x*x, x + x, diamonds).
//   3. Add what reaches a leaf into leaf.grad (+=, dense or row-sparse), so gradients
//      accumulate across backward() calls until zero_grad(). This file alone writes .grad,
//      under a per-leaf lock, so that concurrent backward calls add up.
//   4. Unless retain_graph, free each closure (and its saved arrays) right after it runs.
#include <xgrad/core/autograd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <xtensor/xnoalias.hpp>

namespace xgrad {

// ---- Node destruction without recursion --------------------------------------------------------
// Freeing a long chain recursively takes one stack frame per op. Instead the outermost ~Node
// keeps a queue of the inputs it took over, and a nested ~Node only appends to it. The queue is
// found through a thread_local raw pointer (no destructor: a graph may be freed at exit, after
// this thread's thread_local objects are gone).
Node::~Node() {
    thread_local std::vector<std::shared_ptr<TensorImpl>>* queue = nullptr;
    if (queue) {  // inside an outer ~Node: hand the inputs over and return
        for (auto& in : inputs) queue->push_back(std::move(in.tensor));
        return;   // (backward is destroyed after this, still inside the outer ~Node)
    }
    std::vector<std::shared_ptr<TensorImpl>> pending;
    pending.reserve(inputs.size());
    for (auto& in : inputs) pending.push_back(std::move(in.tensor));
    queue = &pending;
    backward = nullptr;  // what the closure held is queued too
    while (!pending.empty()) {
        std::shared_ptr<TensorImpl> victim = std::move(pending.back());
        pending.pop_back();
        victim.reset();  // may run another ~Node, which only appends to `pending`
    }
    queue = nullptr;
}

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

// ---- anomaly mode ---------------------------------------------------------------------------------
namespace {
thread_local bool g_anomaly = false;
}
bool anomaly_enabled() { return g_anomaly; }
void set_detect_anomaly(bool on) { g_anomaly = on; }
DetectAnomalyGuard::DetectAnomalyGuard(bool on) : prev_(g_anomaly) { g_anomaly = on; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = prev_; }

// ---- recording an op --------------------------------------------------------------------------
namespace {
// Throws if an input already held a NaN when op received it: the NaN came from outside what the
// guard watched (the data, a leaf, a tensor made before the guard), so the op is not to blame.
void blame_nan_input(const std::string& op, const Tensor* inputs, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
        if (!inputs[k].defined()) continue;
        const Array& in = inputs[k].data();
        const auto it = std::find_if(in.begin(), in.end(), [](real v) { return std::isnan(v); });
        if (it == in.end()) continue;
        throw ValueError(fmt::format("anomaly: op '{}' received NaN in its input {} of shape {} at flat index {}: "
                                     "that {} held it before the op ran (check the data or how it was made; "
                                     "detect_anomaly is on)",
                                     op, k, shape_str(in.shape()), it - in.begin(),
                                     inputs[k].is_leaf() ? "leaf (input data or a parameter)" : "tensor"));
    }
}

// Throws if `a` holds a NaN or ±inf, naming the op (anomaly mode). With `inputs`, a ±inf is let
// through when an input already held one: the op passed it on (a -inf attention mask).
void check_finite(const Array& a, const std::string& op, const char* what, const Tensor* inputs = nullptr,
                  std::size_t n = 0) {
    const real* p = a.data();
    int input_inf = -1;  // unknown until the first ±inf in `a`
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isfinite(p[i])) continue;
        if (!std::isnan(p[i]) && inputs) {
            if (input_inf < 0) {
                input_inf = 0;
                for (std::size_t k = 0; k < n && !input_inf; ++k) {
                    const Array& in = inputs[k].data();
                    input_inf = std::any_of(in.begin(), in.end(), [](real v) { return std::isinf(v); });
                }
            }
            if (input_inf) continue;
        }
        if (std::isnan(p[i])) blame_nan_input(op, inputs, n);
        throw ValueError(fmt::format("anomaly: op '{}' produced {} in {} of shape {} at flat index {} "
                                     "(detect_anomaly is on)",
                                     op, std::isnan(p[i]) ? "NaN" : p[i] > 0 ? "inf" : "-inf", what,
                                     shape_str(a.shape()), i));
    }
}

Tensor make_result(Array out, const char* name, const Tensor* inputs, std::size_t n, BackwardFn backward) {
    for (std::size_t i = 0; i < n; ++i)
        if (inputs[i].defined()) check_parameter_shape(*inputs[i].impl(), name);
    if (g_anomaly) check_finite(out, name, "its forward output", inputs, n);
    bool any = false;
    for (std::size_t i = 0; i < n; ++i) any = any || inputs[i].requires_grad();
    if (g_recorder && any)
        for (std::size_t i = 0; i < n; ++i)
            if (inputs[i].requires_grad()) g_recorder->add(inputs[i]);
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

// ---- a leaf's gradient: the one place that writes .grad and sparse_grad ------------------------
// The rules of accumulation (as PyTorch's AccumulateGrad, and torch.sparse's coalesce):
//   dense + dense   = dense    .grad += g; the first gradient is moved in, not copied
//   sparse + sparse = sparse   rows merged: unique ascending indices, duplicates summed
//   sparse + dense  = dense    a sparse table tied to an output head (nn/tying.hpp): the head's
//                              matmul gradient covers all V rows, so the sum is dense anyway
//   rows, keep_sparse = false  scatter-added into the dense .grad: O(n·d), never a (V, d) temporary
// Everything is checked against the leaf's CURRENT shape before anything is written: a table
// resized through data() after a backward must not receive rows, or hold ones, past its end.
namespace xgrad_detail {
// Who is adding a gradient, for messages: "op 'embedding', input 0", or a plain description.
// Formatted only when a check fails (a string built per edge would cost every backward).
struct Source {
    const char* op;
    std::ptrdiff_t input = -1;  // -1: `op` is the whole description
};
}  // namespace xgrad_detail
}  // namespace xgrad

template <>
struct fmt::formatter<xgrad::xgrad_detail::Source> : fmt::formatter<std::string> {
    template <class FormatContext>
    auto format(const xgrad::xgrad_detail::Source& s, FormatContext& ctx) const {
        return fmt::formatter<std::string>::format(
            s.input < 0 ? std::string(s.op) : fmt::format("op '{}', input {}", s.op, s.input), ctx);
    }
};

namespace xgrad {
namespace {
using xgrad_detail::Source;

constexpr const char* kAfterResize = "call zero_grad() (set_to_none) after resizing a parameter";

template <class A, class B>
bool shapes_equal(const A& a, const B& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// Elements per row of a table of shape (V, d...): d·...
std::size_t row_width(const Array::shape_type& shape) {
    std::size_t w = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) w *= shape[i];
    return w;
}

// Throws unless the gradient `leaf` holds fits its current shape. `source` names who is adding.
void check_held(const TensorImpl& leaf, const Source& source) {
    const auto& now = leaf.data.shape();
    if (leaf.grad) {
        check(shapes_equal(leaf.grad->data.shape(), now), "backward",
              "gradient of shape {} held for a leaf now of shape {} ({}); {}",
              lazy_shape(leaf.grad->data.shape()), lazy_shape(now), source, kAfterResize);
    }
    if (leaf.sparse_grad) {
        const SparseGrad& sg = *leaf.sparse_grad;
        check(shapes_equal(sg.dense_shape, now), "backward",
              "row-sparse gradient of shape {} held for a leaf now of shape {} ({}); {}",
              lazy_shape(sg.dense_shape), lazy_shape(now), source, kAfterResize);
        for (std::int64_t row : sg.indices) {
            check(row >= 0 && static_cast<std::size_t>(row) < now[0], "backward",
                  "row-sparse gradient holds row {} of a leaf now of shape {} ({}); {}", row,
                  lazy_shape(now), source, kAfterResize);
        }
    }
}

// Throws unless `g` is a gradient for a tensor of shape `shape`.
void check_new(const Grad& g, const Array::shape_type& shape, const char* op, const Source& source) {
    if (const Array* dense = std::get_if<Array>(&g.value)) {
        check(shapes_equal(dense->shape(), shape), op, "{} gives a gradient of shape {} for a tensor of shape {}",
              source, lazy_shape(dense->shape()), lazy_shape(shape));
        return;
    }
    const RowSparseGrad& r = std::get<RowSparseGrad>(g.value);
    const auto& rs = r.rows.shape();
    check(!shape.empty() && rs.size() == shape.size() && rs[0] == r.indices.size() &&
              std::equal(rs.begin() + 1, rs.end(), shape.begin() + 1),
          op, "{} gives {} gradient rows of shape {} for a table of shape {}", source, r.indices.size(),
          lazy_shape(rs), lazy_shape(shape));
    check(!r.keep_sparse || shape.size() == 2, op, "{} gives a sparse gradient for a table of shape {}; "
          "sparse gradients are for (V, d) tables", source, lazy_shape(shape));
    for (std::size_t i = 0; i < r.indices.size(); ++i) {
        const std::int64_t row = r.indices[i];
        check(row >= 0 && static_cast<std::size_t>(row) < shape[0], op,
              "{} gives a gradient for row {} (position {}) of a table of shape {}; rows are in [0, {})",
              source, row, i, lazy_shape(shape), shape[0]);
    }
}

// dst[indices[i], ...] += rows[i, ...]: the row scatter-add, duplicates summing.
void scatter_add(Array& dst, const RowSparseGrad& r) {
    const std::size_t w = row_width(dst.shape());
    for (std::size_t i = 0; i < r.indices.size(); ++i) {
        real* row = dst.data() + static_cast<std::size_t>(r.indices[i]) * w;
        const real* src = r.rows.data() + i * w;
        for (std::size_t j = 0; j < w; ++j) row[j] += src[j];
    }
}

bool strictly_ascending(const std::vector<std::int64_t>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

// grad += g in place, bumping its version: a graph that used x.grad() in an op then refuses to
// backward with the changed values, as after PyTorch's in-place accumulation.
void add_in_place(TensorImpl& grad, const Array& g) {
    xt::noalias(grad.data) += g;
    ++grad.version;
}

// Adds a checked `g` into `leaf`'s gradient (check_held and check_new have passed).
void add_to_leaf(TensorImpl& leaf, Grad g) {
    if (Array* dense = std::get_if<Array>(&g.value)) {
        if (leaf.sparse_grad) {  // sparse + dense = dense
            const SparseGrad& sg = *leaf.sparse_grad;
            scatter_add(*dense, RowSparseGrad{sg.indices, sg.values});
            leaf.sparse_grad.reset();
        }
        if (!leaf.grad) leaf.grad = std::make_shared<TensorImpl>(std::move(*dense));
        else add_in_place(*leaf.grad, *dense);
        return;
    }
    RowSparseGrad& r = std::get<RowSparseGrad>(g.value);
    if (r.keep_sparse && !leaf.grad) {  // sparse + sparse = sparse
        if (!leaf.sparse_grad) {
            leaf.sparse_grad = std::make_unique<SparseGrad>();
            leaf.sparse_grad->dense_shape = to_shape(leaf.data.shape());
            leaf.sparse_grad->values = Array(ArrayShape{0, leaf.data.shape()[1]});
        }
        SparseGrad& sg = *leaf.sparse_grad;
        if (sg.indices.empty() && strictly_ascending(r.indices)) {  // already coalesced: moved in
            sg.indices = std::move(r.indices);
            sg.values = std::move(r.rows);
        } else {
            sg.accumulate(r.indices, r.rows);
        }
        return;
    }
    if (!leaf.grad) {  // the one-time (V, d...) dense gradient; a held sparse one joins it
        const ArrayShape now(leaf.data.shape().begin(), leaf.data.shape().end());
        leaf.grad = std::make_shared<TensorImpl>(leaf.sparse_grad ? leaf.sparse_grad->to_dense() : zeros_array(now));
        leaf.sparse_grad.reset();
    }
    scatter_add(leaf.grad->data, r);
    ++leaf.grad->version;
}

// Drops both kinds of gradient; the caller holds leaf_lock(leaf).
void drop_grad(TensorImpl& leaf) {
    leaf.grad.reset();
    leaf.sparse_grad.reset();
}

// Leaves' gradients are written under one of these locks, picked by the leaf's address, so that
// threads backwarding into a shared leaf sum their gradients (as PyTorch's AccumulateGrad lock).
std::mutex& leaf_lock(const TensorImpl& leaf) {
    static std::mutex locks[64];
    return locks[(reinterpret_cast<std::uintptr_t>(&leaf) / alignof(TensorImpl)) % 64];
}

void accumulate_leaf(TensorImpl& leaf, Grad g, const char* op, const Source& source) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    check_parameter_shape(leaf, "backward");
    check_new(g, leaf.data.shape(), op, source);
    check_held(leaf, source);
    add_to_leaf(leaf, std::move(g));
}

// A non-leaf's dL/d(output), summed over its consumers; row-sparse gradients are densified.
void add_to_sum(std::optional<Array>& sum, Grad g, const Array::shape_type& shape) {
    if (Array* dense = std::get_if<Array>(&g.value)) {
        if (!sum) sum = std::move(*dense);
        else xt::noalias(*sum) += *dense;
        return;
    }
    if (!sum) sum = zeros_array(ArrayShape(shape.begin(), shape.end()));
    scatter_add(*sum, std::get<RowSparseGrad>(g.value));
}

const Array& values_of(const Grad& g) {
    if (const Array* dense = std::get_if<Array>(&g.value)) return *dense;
    return std::get<RowSparseGrad>(g.value).rows;
}

}  // namespace

void set_leaf_grad(TensorImpl& leaf, Grad g) {
    check_new(g, leaf.data.shape(), "set_grad", Source{"set_grad"});
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    drop_grad(leaf);
    add_to_leaf(leaf, std::move(g));
}

void clear_grad(TensorImpl& leaf) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    drop_grad(leaf);
}

// zero_grad_ and scale_grad_ change the gradient in place and bump its version, so that a graph
// recorded on it (x.grad() used in an op) refuses to backward afterwards, as PyTorch's zero_().
void zero_grad_(TensorImpl& leaf) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    if (leaf.grad) {
        leaf.grad->data.fill(0);
        ++leaf.grad->version;
    }
    if (leaf.sparse_grad) {  // an empty coalesced gradient: k = 0 rows
        leaf.sparse_grad->indices.clear();
        leaf.sparse_grad->values = Array(ArrayShape{0, static_cast<std::size_t>(leaf.sparse_grad->dense_shape.at(1))});
    }
}

void scale_grad_(TensorImpl& leaf, real c) {
    std::lock_guard<std::mutex> lock(leaf_lock(leaf));
    Array* a = leaf.sparse_grad ? &leaf.sparse_grad->values : leaf.grad ? &leaf.grad->data : nullptr;
    if (!a) return;
    if (leaf.grad) ++leaf.grad->version;
    real* p = a->data();
    for (std::size_t i = 0; i < a->size(); ++i) p[i] *= c;
}

// ---- the backward pass --------------------------------------------------------------------------
namespace {

[[noreturn]] void throw_released(const Node& node) {
    throw ValueError("backward: trying to backward through the graph a second time (op '" + node.name +
                     "'); its saved arrays were freed after the first backward. Pass retain_graph=true "
                     "to the first backward() if you need to backward twice.");
}

// Post-order DFS from the root with an explicit stack: non-leaf tensors, each after all its
// inputs, and each node's position in `pos`. Throws before any gradient is touched if part of the
// graph was freed. The marks live in this call's `visited`, never in the shared graph.
// Where grad() sends the gradients of the tensors it was asked about, instead of into .grad. The
// pass treats them as leaves: it stops there.
struct Capture {
    std::unordered_map<const TensorImpl*, std::size_t> index;  // wanted tensor → its slot
    std::vector<std::optional<Array>> sums;                     // dL/d(wanted), summed
    bool wants(const TensorImpl* t) const { return index.count(t) > 0; }
};

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
            std::lock_guard<std::mutex> lock(node.mutex);
            if (node.released.load(std::memory_order_relaxed)) throw_released(node);
            check_unmodified(node);
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
            if (g_anomaly) check_finite(values_of(g), node.name, fmt::format("its backward's gradient for input {}", i).c_str());
            const Source source{node.name.c_str(), static_cast<std::ptrdiff_t>(i)};
            if (capture && capture->wants(in)) {
                check_new(g, in->data.shape(), "backward", source);
                add_to_sum(capture->sums[capture->index.at(in)], std::move(g), in->data.shape());
            } else if (!in->grad_fn) {
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
    if (capture.wants(r)) capture.sums[capture.index.at(r)] = root_grad;  // dL/d(output) itself
    else if (r->grad_fn) backward_pass(r, root_grad, retain_graph, &capture);
    Grads out(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::size_t first = capture.index.at(inputs[i].impl());
        if (!inputs[i].requires_grad()) continue;
        if (first == i && capture.sums[i]) out[i] = Grad(std::move(*capture.sums[i]));
        else if (first < i && out[first]) out[i] = Grad(Array(values_of(*out[first])));  // a repeated input
    }
    return out;
}

void visit_graph(const Tensor& root, const std::function<void(const TensorImpl& t)>& visit) {
    if (!root.defined()) return;
    std::unordered_set<const TensorImpl*> seen{root.impl()};
    std::vector<const TensorImpl*> stack{root.impl()};
    while (!stack.empty()) {
        const TensorImpl* t = stack.back();
        stack.pop_back();
        visit(*t);
        if (!t->grad_fn) continue;
        for (const auto& in : t->grad_fn->inputs)
            if (seen.insert(in.tensor.get()).second) stack.push_back(in.tensor.get());
    }
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    run_backward(*this, gradient, retain_graph);
}

}  // namespace xgrad
