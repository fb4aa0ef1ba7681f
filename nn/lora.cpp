// nn/lora.cpp — the LoRA adapter (nn/lora.hpp): its term beside the host Linear's output, merge
// and unmerge by one product each, and the walk that adapts a model's layers by name.
#include <xgrad/nn/lora.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include <xgrad/core/blas.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/error.hpp>
#include <xgrad/nn/dropout.hpp>

namespace xgrad::nn {

double LoRAOptions::scaling() const {
    return rslora_ ? alpha_ / std::sqrt(double(rank_)) : alpha_ / double(rank_);
}

namespace {
// Throws ValueError, naming the value and its range, for options no adapter of an in → out layer takes.
void check_lora_options(std::int64_t in, std::int64_t out, const LoRAOptions& options) {
    const std::int64_t r = options.rank();
    check(r >= 1 && r <= std::min(in, out), "add_lora",
          "rank r = {} is outside [1, {}] for a Linear of {} → {} features (r above min(in, out) adds "
          "nothing a full update would not)", r, std::min(in, out), in, out);
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

LoRA::LoRA(Linear& host, const LoRAOptions& options) : weight_(host.weight), options_(options) {
    const std::int64_t in = host.in_features(), out = host.out_features(), r = options.rank();
    check_lora_options(in, out, options);
    A = std::make_shared<Linear>(in, r, /*bias=*/false);   // (r, in) ~ U(±1/√in), as PEFT's kaiming_uniform(a = √5)
    B = std::make_shared<Linear>(r, out, /*bias=*/false);  // (out, r)
    B->weight.mutable_data().fill(0);  // B = 0: s·B·A = 0, the adapted layer starts as the base
}

// x (..., in) → A → (..., r) → B → (..., out), times s, added to the base's y. Backward reaches
// A and B through their own Linear products; the host's frozen W takes no part in it.
Tensor LoRA::apply(const Tensor& x, const Tensor& y) const {
    if (!enabled_ || merged_) return y;
    const Tensor h = functional::dropout(x, options_.dropout(), A->is_training());  // x itself at p = 0 or in eval
    return y + B->forward(A->forward(h)) * real(options_.scaling());
}

namespace {
// W (out, in) += s · B (out, r) · A (r, in): one gemm, accumulated into W (beta = 1).
void add_scaled_lora_update(Tensor W, const Tensor& B, const Tensor& A, double s) {
    const std::size_t out = B.data().shape()[0], r = B.data().shape()[1], in = A.data().shape()[1];
    gemm(false, false, out, in, r, real(s), B.data().data(), r, A.data().data(), in, 1, W.mutable_data().data(), in);
}
}  // namespace

void LoRA::merge() {
    check(!merged_, "LoRA::merge", "the adapter is merged already (unmerge() first)");
    add_scaled_lora_update(weight_, B->weight, A->weight, options_.scaling());
    merged_ = true;
}

void LoRA::unmerge() {
    check(merged_, "LoRA::unmerge", "the adapter is not merged (merge() first)");
    add_scaled_lora_update(weight_, B->weight, A->weight, -options_.scaling());
    merged_ = false;
}

void LoRA::enabled(bool on) {
    check(!merged_ || on, "LoRA::enabled", "the adapter is merged into W, which is no longer the base: "
                                           "unmerge() before enabled(false)");
    enabled_ = on;
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

// Every Linear below `model` with its dotted path, depth first in registration order (the order
// of named_parameters), walked with a stack: a module tree may be deeper than the call stack.
// A Linear's own children (an adapter's lora_A and lora_B) are not entered.
std::vector<std::pair<std::string, Linear*>> linears_by_path(const Module& model) {
    std::vector<std::pair<std::string, Linear*>> found;
    std::vector<std::pair<std::string, Module*>> stack;
    const auto push_children = [&stack](const Module& parent, const std::string& path) {
        const auto children = parent.named_children();
        for (auto it = children.rbegin(); it != children.rend(); ++it)
            stack.emplace_back(path.empty() ? it->first : path + "." + it->first, it->second.get());
    };
    push_children(model, "");
    while (!stack.empty()) {
        auto [path, module] = stack.back();
        stack.pop_back();
        if (auto* linear = dynamic_cast<Linear*>(module)) found.emplace_back(path, linear);
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

}  // namespace

std::vector<std::string> apply_lora(Module& model, const std::vector<std::string>& targets,
                                    const LoRAOptions& options) {
    check(!targets.empty(), "apply_lora", "no target modules given (for example {{\"attn.c_attn\", \"mlp.*\"}})");
    const auto linears = linears_by_path(model);
    // A Linear registered under several paths is one layer: chosen through any of them, it is adapted
    // once, under its first path (the name named_parameters() gives its weight).
    std::vector<std::size_t> first(linears.size());
    for (std::size_t i = 0; i < linears.size(); ++i) {
        first[i] = i;
        for (std::size_t j = 0; j < i; ++j)
            if (linears[j].second == linears[i].second) { first[i] = j; break; }
    }
    std::vector<std::vector<std::string>> paths_split;
    for (const auto& [path, linear] : linears) paths_split.push_back(dotted_components(path));
    std::vector<bool> chosen(linears.size(), false);
    for (const std::string& target : targets) {
        const auto want = dotted_components(target);
        bool any = false;
        for (std::size_t i = 0; i < linears.size(); ++i)
            if (target_matches(paths_split[i], want)) chosen[first[i]] = any = true;
        if (any) continue;
        std::string names;
        for (std::size_t i = 0; i < linears.size() && i < 12; ++i) names += (i ? ", " : "") + linears[i].first;
        if (linears.size() > 12) names += ", ...";
        throw ValueError(fmt::format("apply_lora: the target '{}' matches no Linear of the model; its Linear "
                                     "modules are: {}", target, linears.empty() ? "(none)" : names));
    }
    for (std::size_t i = 0; i < linears.size(); ++i) {  // every refusal before the first change
        if (!chosen[i]) continue;
        const Linear& layer = *linears[i].second;
        check(layer.lora() == nullptr, "apply_lora", "the Linear '{}' has an adapter already", linears[i].first);
        check_not_tied(layer, linears[i].first);
        check_lora_options(layer.in_features(), layer.out_features(), options);
    }
    for (Tensor& p : model.parameters()) p.requires_grad_(false);
    std::vector<std::string> paths;
    for (std::size_t i = 0; i < linears.size(); ++i) {
        if (!chosen[i]) continue;
        add_lora(*linears[i].second, options);
        paths.push_back(linears[i].first);
    }
    return paths;
}

std::vector<std::pair<std::string, Linear*>> adapted_layers(const Module& model) {
    auto layers = linears_by_path(model);
    layers.erase(std::remove_if(layers.begin(), layers.end(), [](const auto& l) { return l.second->lora() == nullptr; }),
                 layers.end());
    return layers;
}

ParameterCounts count_parameters(const Module& model) {
    ParameterCounts counts;
    for (const Tensor& p : model.parameters())
        (p.requires_grad() ? counts.trainable : counts.frozen) += std::size_t(p.numel());
    return counts;
}

}  // namespace xgrad::nn
