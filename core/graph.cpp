// core/graph.cpp — the graph as memory: freeing a long chain without recursion (~Node), and
// walking every tensor a graph keeps alive (visit_graph).
#include <xgrad/core/autograd.hpp>

#include <unordered_set>

namespace xgrad {

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

}  // namespace xgrad
