// nn/lora.cpp — the LoRA adapter (nn/lora.hpp): its term beside the host Linear's output, merge
// and unmerge by one product each, and the walk that adapts a model's layers by name.
#include <xgrad/nn/lora.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/blas.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/slicing.hpp>
#include <xgrad/nn/detail/lora.hpp>
#include <xgrad/nn/dropout.hpp>

namespace xgrad::nn {

double LoRAOptions::scaling() const {
    return rslora_ ? alpha_ / std::sqrt(double(rank_)) : alpha_ / double(rank_);
}

namespace {

// Throws ValueError unless the parts are positive sizes summing to `out`, a flag each, one adapted.
// Returns the smallest adapted part's size (`out` without parts).
std::int64_t check_parts(std::int64_t out, const LoRAOptions& options) {
    const auto& sizes = options.part_sizes();
    const auto& adapted = options.part_adapted();
    if (sizes.empty() && adapted.empty()) return out;
    check(sizes.size() == adapted.size(), "add_lora", "parts: {} sizes but {} adapted flags (one each)",
          sizes.size(), adapted.size());
    std::int64_t sum = 0, smallest = out;
    bool overflow = false;  // a sum past 2^63 − 1 would wrap, and might wrap to `out`
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        check(sizes[i] >= 1, "add_lora", "parts: size {} of part {} is not positive", sizes[i], i);
        overflow = overflow || __builtin_add_overflow(sum, sizes[i], &sum);
        if (adapted[i]) smallest = std::min(smallest, sizes[i]);
    }
    check(!overflow && sum == out, "add_lora", "parts: the sizes {} sum to {}, the Linear has out_features = {}",
          fmt::join(sizes, ", "), overflow ? "more than 2^63 - 1" : std::to_string(sum), out);
    check(std::find(adapted.begin(), adapted.end(), true) != adapted.end(), "add_lora",
          "parts: no part is adapted (mark at least one true)");
    return smallest;
}

// α, the scaling s it gives, and dropout: what every adapter checks.
void check_alpha_and_dropout(const LoRAOptions& options) {
    const std::int64_t r = options.rank();
    check(std::isfinite(options.alpha()) && options.alpha() > 0, "add_lora", "alpha = {} must be finite and > 0",
          options.alpha());
    // s multiplies the adapter's output as a `real`: inf would turn B = 0 into NaN, 0 would mute the adapter.
    const real s = real(options.scaling());
    check(std::isfinite(s) && s > 0, "add_lora", "the scaling s = {} (alpha = {}, r = {}) is {} as a {}-byte real; "
          "choose alpha nearer r", options.scaling(), options.alpha(), r, s > 0 ? "infinite" : "zero", sizeof(real));
    check(options.dropout() >= 0 && options.dropout() < 1, "add_lora", "dropout = {} is outside [0, 1)",
          options.dropout());
}
}  // namespace

namespace detail {
void check_lora_options(std::int64_t in, std::int64_t out, const LoRAOptions& options) {
    const std::int64_t r = options.rank(), rows = check_parts(out, options), most = std::min(in, rows);
    check(r >= 1 && r <= most, "add_lora",
          "rank r = {} is outside [1, {}] for a Linear of {} → {} features{} (r above min(in, out) adds "
          "nothing a full update would not)", r, most, in, out,
          rows == out ? "" : fmt::format(" whose smallest adapted part has {} rows", rows));
    check_alpha_and_dropout(options);
}

void check_embedding_lora_options(std::int64_t V, std::int64_t d, const LoRAOptions& options) {
    const std::int64_t r = options.rank();
    check(r >= 1 && r <= std::min(V, d), "add_lora", "rank r = {} is outside [1, {}] for an Embedding of {} rows "
          "of {} features", r, std::min(V, d), V, d);
    check(options.part_sizes().empty() && options.part_adapted().empty(), "add_lora",
          "parts split a Linear's output; an Embedding's adapter takes none");
    check_alpha_and_dropout(options);
}
}  // namespace detail

void LoRAAdapter::merge() {
    check(!merged_, "LoRA::merge", "the adapter is merged already (unmerge() first)");
    check(enabled_, "LoRA::merge", "the adapter is disabled (enabled(false)): its update is not part of the model "
                                   "the layer computes; enabled(true) first to merge it");
    add_update(options_.scaling(), weight_.mutable_data().data());
    merged_ = true;
}

void LoRAAdapter::unmerge() {
    check(merged_, "LoRA::unmerge", "the adapter is not merged (merge() first)");
    add_update(-options_.scaling(), weight_.mutable_data().data());
    merged_ = false;
}

Array LoRAAdapter::merged_weight() const {
    Array W = weight_.data();
    if (!merged_) add_update(options_.scaling(), W.data());
    return W;
}

bool LoRAAdapter::active(bool training) const {
    const std::vector<Tensor> ab = parameters();
    const bool trains = std::any_of(ab.begin(), ab.end(), [](const Tensor& p) { return p.requires_grad(); });
    check(!(merged_ && training && grad_enabled() && trains), "LoRA",
          "the adapter is merged into the weight while the model trains: the forward would use the frozen "
          "merged weight, and A and B would get no gradient; unmerge() before training (or eval() to run merged)");
    return enabled_ && !merged_;
}

void LoRAAdapter::check_state(const std::string& path, const std::set<std::string>* loading, const char* op) const {
    const std::string where = path.empty() ? "the model" : "'" + path + "'";
    check(!merged_, op, "the LoRA adapter of {} is merged into its weight, and a state dict keeps the base "
          "weight and the adapter apart with no mark of a merge: unmerge() first (nn::merged_state_dict gives "
          "the merged weights under the base's names)", where);
    if (!loading) return;
    const std::string prefix = path.empty() ? "lora_" : path + ".lora_";
    const auto it = loading->lower_bound(prefix);
    check(it != loading->end() && it->compare(0, prefix.size(), prefix) == 0, op,
          "the state dict has no tensor of the LoRA adapter of {} ('{}...'): a base checkpoint? load the base "
          "weights before nn::apply_lora, then the adapter with nn::load_adapter", where, prefix);
}

void LoRAAdapter::enabled(bool on) {
    check(!merged_ || on, "LoRA::enabled", "the adapter is merged into W, which is no longer the base: "
                                           "unmerge() before enabled(false)");
    enabled_ = on;
}

LoRA::LoRA(Linear& host, const LoRAOptions& options)
    : LoRAAdapter(options, host.weight), out_(host.out_features()) {
    const std::int64_t in = host.in_features(), r = options.rank();
    detail::check_lora_options(in, out_, options);
    // The adapted parts as blocks of W's rows; without parts, one block of every row.
    std::vector<std::int64_t> sizes = options.part_sizes();
    std::vector<bool> adapted = options.part_adapted();
    if (sizes.empty()) {
        sizes = {out_};
        adapted = {true};
    }
    std::int64_t row = 0, a_row = 0, b_row = 0;
    for (std::size_t i = 0; i < sizes.size(); row += sizes[i], ++i) {
        if (!adapted[i]) continue;
        blocks_.push_back({row, sizes[i], a_row, b_row});
        a_row += r;
        b_row += sizes[i];
    }
    A = std::make_shared<Linear>(in, a_row, /*bias=*/false);   // (k·r, in) ~ U(±1/√in), as PEFT's kaiming_uniform(a = √5)
    B = std::make_shared<Linear>(r, b_row, /*bias=*/false);    // (Σ n_j, r)
    B->weight.mutable_data().fill(0);  // B = 0: s·B·A = 0, the adapted layer starts as the base
}

Tensor LoRA::forward(const Tensor& x, const Tensor& weight, const Tensor& bias) const {
    const bool training = A->is_training();
    if (!active(training)) return functional::linear(x, weight, bias);
    const bool one_block = blocks_.size() == 1 && blocks_[0].rows == out_;
    if (one_block && (!training || options_.dropout() == 0))  // A sees x itself: one op
        return functional::lora_linear(x, weight, bias, A->weight, B->weight, real(options_.scaling()));
    return apply(x, functional::linear(x, weight, bias));
}

// x (..., in) → A → (..., r) → B → (..., out), times s, added to the base's y. Backward reaches
// A and B through their own Linear products; the host's frozen W takes no part in it.
// With parts: xA (..., k·r) holds every x A_jᵀ side by side; part j's slice of y gets
// s·(x A_jᵀ) B_jᵀ, the other parts' slices pass as they are, and the slices are joined again.
Tensor LoRA::apply(const Tensor& x, const Tensor& y) const {
    if (!active(A->is_training())) return y;
    const Tensor h = functional::dropout(x, options_.dropout(), A->is_training());  // x itself at p = 0 or in eval
    const real s = real(options_.scaling());
    if (blocks_.size() == 1 && blocks_[0].rows == out_) return y + B->forward(A->forward(h)) * s;
    const Tensor xA = A->forward(h);  // (..., k·r)
    std::vector<Tensor> slices;
    std::int64_t row = 0;
    for (const Block& b : blocks_) {
        if (b.row > row) slices.push_back(narrow(y, -1, row, b.row - row));  // rows not adapted
        const Tensor B_j = narrow(B->weight, 0, b.b_row, b.rows);            // (n_j, r)
        const Tensor xA_j = narrow(xA, -1, b.a_row, options_.rank());        // (..., r)
        slices.push_back(narrow(y, -1, b.row, b.rows) + functional::linear(xA_j, B_j) * s);
        row = b.row + b.rows;
    }
    if (row < out_) slices.push_back(narrow(y, -1, row, out_ - row));
    return concat(slices, -1);
}

// W (out, in) += s · B (out, r) · A (r, in): one gemm per block, accumulated into W (beta = 1);
// block j: W's rows of part j (n_j, in) += s · B_j (n_j, r) · A_j (r, in).
void LoRA::add_update(double s, real* pw) const {
    const std::size_t in = std::size_t(A->in_features()), r = std::size_t(options_.rank());
    const real* pa = A->weight.data().data();
    const real* pb = B->weight.data().data();
    for (const Block& b : blocks_)
        gemm(false, false, std::size_t(b.rows), in, r, real(s), pb + std::size_t(b.b_row) * r, r,
             pa + std::size_t(b.a_row) * in, in, 1, pw + std::size_t(b.row) * in, in);
}

namespace {
// W shared with the token table: freezing it would freeze the table, merge() would move every lookup.
void check_not_tied(const Linear& layer, const std::string& path) {
    check(!layer.tied(), "add_lora", "the Linear{} ({} → {} features) is tied to an Embedding's table "
          "(nn::tie_weights): an adapter would freeze the table too, and merge() would change every token's "
          "lookup; leave it out of the targets", path.empty() ? "" : " '" + path + "'", layer.in_features(),
          layer.out_features());
}
}  // namespace

LoRA& add_lora(Linear& layer, const LoRAOptions& options) {
    check(layer.lora_ == nullptr, "add_lora", "this Linear ({} → {} features) has an adapter already",
          layer.in_features(), layer.out_features());
    check_not_tied(layer, "");
    auto adapter = std::make_shared<LoRA>(layer, options);  // checks the options
    adapter->A->train(layer.is_training());
    adapter->B->train(layer.is_training());
    layer.register_module("lora_A", adapter->A);
    layer.register_module("lora_B", adapter->B);
    // Frozen: no dW and no db in backward (nn/linear.cpp), and no optimizer state for them.
    layer.weight.requires_grad_(false);
    if (layer.bias.defined()) layer.bias.requires_grad_(false);
    layer.lora_ = std::move(adapter);
    return *layer.lora_;
}

namespace {

// A layer an adapter can be added to, a Linear or an Embedding, with its dotted path.
struct Host {
    std::string path;
    Linear* linear = nullptr;
    Embedding* embedding = nullptr;
    LoRAAdapter* adapter() const { return linear ? static_cast<LoRAAdapter*>(linear->lora()) : embedding->lora(); }
    const Module* module() const { return linear ? static_cast<const Module*>(linear) : embedding; }
};

// Every Linear and Embedding below `model` with its dotted path, depth first in registration order
// (the order of named_parameters), walked with a stack: a module tree may be deeper than the call
// stack. A host's own children (its adapter's A and B) are not entered. A model that is itself a
// Linear or an Embedding is its only host, at the path "".
std::vector<Host> hosts_by_path(const Module& model) {
    std::vector<Host> found;
    std::vector<std::pair<std::string, Module*>> stack;
    const auto push_children = [&stack](const Module& parent, const std::string& path) {
        const auto children = parent.named_children();
        for (auto it = children.rbegin(); it != children.rend(); ++it)
            stack.emplace_back(path.empty() ? it->first : path + "." + it->first, it->second.get());
    };
    auto* root = const_cast<Module*>(&model);  // the walk hands out hosts to change, as from the children
    if (dynamic_cast<Linear*>(root) || dynamic_cast<Embedding*>(root)) stack.emplace_back("", root);
    else push_children(model, "");
    while (!stack.empty()) {
        auto [path, module] = stack.back();
        stack.pop_back();
        if (auto* linear = dynamic_cast<Linear*>(module)) found.push_back({path, linear, nullptr});
        else if (auto* table = dynamic_cast<Embedding*>(module)) found.push_back({path, nullptr, table});
        else push_children(*module, path);
    }
    return found;
}

std::vector<std::string> dotted_components(const std::string& dotted) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        const std::size_t dot = dotted.find('.', start);
        parts.push_back(dotted.substr(start, dot - start));
        if (dot == std::string::npos) return parts;
        start = dot + 1;
    }
}

// The path's last components equal the target's, "*" matching any one.
bool target_matches(const std::vector<std::string>& path, const std::vector<std::string>& target) {
    if (target.size() > path.size()) return false;
    const std::size_t offset = path.size() - target.size();
    for (std::size_t i = 0; i < target.size(); ++i)
        if (target[i] != "*" && target[i] != path[offset + i]) return false;
    return true;
}

// chosen[i]: some target matches hosts[i]. A layer registered under several paths is one layer:
// chosen through any of them, it is marked once, at its first path (the name named_parameters()
// gives its weight). Throws ValueError for a target that matches no host.
std::vector<bool> choose_hosts(const std::vector<Host>& hosts, const std::vector<std::string>& targets) {
    std::vector<std::size_t> first(hosts.size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        first[i] = i;
        for (std::size_t j = 0; j < i; ++j)
            if (hosts[j].module() == hosts[i].module()) { first[i] = j; break; }
    }
    std::vector<std::vector<std::string>> paths_split;
    for (const Host& host : hosts) paths_split.push_back(dotted_components(host.path));
    std::vector<bool> chosen(hosts.size(), false);
    for (const std::string& target : targets) {
        const auto want = dotted_components(target);
        bool any = false;
        for (std::size_t i = 0; i < hosts.size(); ++i)
            if (target_matches(paths_split[i], want)) chosen[first[i]] = any = true;
        if (any) continue;
        std::string names;
        for (std::size_t i = 0; i < hosts.size() && i < 12; ++i) names += (i ? ", " : "") + hosts[i].path;
        if (hosts.size() > 12) names += ", ...";
        throw ValueError(fmt::format("apply_lora: the target '{}' matches no Linear or Embedding of the model; its "
                                     "Linear and Embedding modules are: {}", target, names));
    }
    return chosen;
}

// add_lora's refusals of a chosen host, named by its path.
void check_host(const Host& host, const LoRAOptions& options) {
    const char* kind = host.linear ? "Linear" : "Embedding";
    check(host.adapter() == nullptr, "apply_lora", "the {} '{}' has an adapter already", kind, host.path);
    if (host.linear) check_not_tied(*host.linear, host.path);
    try {
        if (host.linear) detail::check_lora_options(host.linear->in_features(), host.linear->out_features(), options);
        else detail::check_embedding_lora_options(host.embedding->num_embeddings(), host.embedding->embedding_dim(), options);
    } catch (const ValueError& e) {  // the same refusal, naming the layer it is about
        throw ValueError(fmt::format("apply_lora: the {} '{}': {}", kind, host.path, e.what()));
    }
}

}  // namespace

std::vector<std::string> apply_lora(Module& model, const std::vector<std::string>& targets,
                                    const LoRAOptions& options) {
    check(!targets.empty(), "apply_lora", "no target modules given (for example {{\"attn.c_attn\", \"mlp.*\"}})");
    const std::vector<Host> hosts = hosts_by_path(model);
    check(!hosts.empty(), "apply_lora", "the model has no Linear or Embedding to adapt");
    const std::vector<bool> chosen = choose_hosts(hosts, targets);
    for (std::size_t i = 0; i < hosts.size(); ++i)  // every refusal before the first change
        if (chosen[i]) check_host(hosts[i], options);
    // The base frozen; adapters added by an earlier call stay trainable.
    std::set<const TensorImpl*> adapters;
    for (const auto& [path, adapter] : adapted_layers(model))
        for (const Tensor& p : adapter->parameters()) adapters.insert(p.impl());
    for (Tensor& p : model.parameters())
        if (!adapters.count(p.impl())) p.requires_grad_(false);
    std::vector<std::string> paths;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        if (!chosen[i]) continue;
        if (hosts[i].linear) add_lora(*hosts[i].linear, options);
        else add_lora(*hosts[i].embedding, options);
        paths.push_back(hosts[i].path);
    }
    return paths;
}

std::vector<std::pair<std::string, LoRAAdapter*>> adapted_layers(const Module& model) {
    std::vector<std::pair<std::string, LoRAAdapter*>> found;
    for (const Host& host : hosts_by_path(model)) {
        const bool seen = std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.second == host.adapter(); });
        if (host.adapter() && !seen) found.emplace_back(host.path, host.adapter());  // a shared layer once, at its first path
    }
    return found;
}

NamedTensors merged_state_dict(const Module& model) {
    const NamedTensors state = model.state_dict();  // refuses a merged adapter
    std::set<const TensorImpl*> adapter_tensors;
    std::map<const TensorImpl*, Array> merged;  // a host's W → W + s·ΔW
    for (const auto& [path, adapter] : adapted_layers(model)) {
        for (const Tensor& p : adapter->parameters()) adapter_tensors.insert(p.impl());
        if (adapter->enabled()) merged[adapter->host_weight().impl()] = adapter->merged_weight();
    }
    NamedTensors out;
    for (const auto& [name, t] : state) {
        if (adapter_tensors.count(t.impl())) continue;
        const auto it = merged.find(t.impl());
        out.emplace_back(name, it == merged.end() ? t : Tensor(std::move(it->second)));
    }
    return out;
}

ParameterCounts count_parameters(const Module& model) {
    ParameterCounts counts;
    for (const Tensor& p : model.parameters())
        (p.requires_grad() ? counts.trainable : counts.frozen) += std::size_t(p.numel());
    return counts;
}

}  // namespace xgrad::nn
