// tests/examples/gpt_reference.hpp — examples/gpt's models against a PyTorch dump (used by
// test_gpt.cpp for GPT-2's block and test_gpt_llama.cpp for LLaMA's).
//
// A dump, written by tests/reference/make_gpt_reference.py or make_llama_reference.py with
// Debian's torch 1.13 in float64 from float32 weights, holds per variant the initial weights
// under the PyTorch names, the logits, loss and every gradient on one batch, and the losses and
// gradient norms of 10 train_step()s. xgrad (float32) must give
//   the logits (B, T, V) and the loss          to 1e-5 relative
//   every parameter's gradient                 to 1e-4 relative
//   the losses of 10 train_step()s             to 1e-5 relative   (AdamW, two groups, clip 1.0)
// where a tensor's relative error is max|xgrad − torch| / max|torch| (llm.c's test_gpt2
// accepts 1e-2). The weights load by name, strictly: the names are the PyTorch model's.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "examples/gpt/model.hpp"
#include <xgrad/nn/serialize.hpp>

namespace gpt::testing {

inline const xgrad::nn::SafetensorsFile& reference(const std::string& file) {
    static std::map<std::string, xgrad::nn::SafetensorsFile> files;
    auto it = files.find(file);
    if (it == files.end())  // written by Python: no xgrad checksum
        it = files.emplace(file, xgrad::nn::load_safetensors(std::string(XGRAD_REFERENCE_DIR) + "/" + file,
                                                             xgrad::nn::LoadOptions().require_checksum(false)))
                 .first;
    return it->second;
}

inline const Tensor& expected(const std::string& file, const std::string& name) {
    for (const auto& [n, t] : reference(file).tensors)
        if (n == name) return t;
    FAIL(file << " has no tensor '" << name << "'");
    throw std::logic_error("unreachable");
}

inline IndexTensor ids_of(const Tensor& t) {  // ids stored as F32 (exact below 2^24)
    IndexArray a(t.data().shape());
    std::transform(t.data().begin(), t.data().end(), a.begin(), [](real v) { return std::int64_t(v); });
    return IndexTensor(std::move(a));
}

// max|a − b| / max|b|
inline double rel_err(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    double diff = 0, scale = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
        diff = std::max(diff, std::abs(double(a.data().data()[i]) - double(b.data().data()[i])));
        scale = std::max(scale, std::abs(double(b.data().data()[i])));
    }
    return diff / scale;
}

// Loads `variant`'s weights into `model`, then checks the forward, the backward and 10 steps.
inline void check_model_against(const std::string& file, const std::string& variant, LanguageModel& model) {
    NamedTensors weights;
    const std::string prefix = variant + "/weight/";
    for (const auto& [n, t] : reference(file).tensors)
        if (n.compare(0, prefix.size(), prefix) == 0) weights.emplace_back(n.substr(prefix.size()), t);
    model.load_state_dict(weights);  // strict: every PyTorch name present, no other
    const IndexTensor x = ids_of(expected(file, "inputs")), y = ids_of(expected(file, "targets"));

    // ---- forward and backward --------------------------------------------------------------
    Tensor logits = model.forward(x);                                   // (B, T, V)
    Tensor loss = nn::functional::cross_entropy(logits, y);             // ()
    const double ref_loss = expected(file, variant + "/loss").item();
    CHECK(rel_err(logits, expected(file, variant + "/logits")) < 1e-5);
    CHECK(std::abs(loss.item() - ref_loss) / ref_loss < 1e-5);
    loss.backward();
    for (const auto& [name, p] : model.named_parameters()) {
        INFO(variant << " gradient of " << name);
        CHECK(rel_err(p.grad(), expected(file, variant + "/grad/" + name)) < 1e-4);
    }

    // ---- 10 training steps, as the example takes them ---------------------------------------
    auto opt = make_adamw(model, 1e-3, 0.9, 0.99, 0.1);
    const Tensor& losses = expected(file, variant + "/losses");
    const Tensor& norms = expected(file, variant + "/grad_norms");
    for (std::size_t k = 0; k < 10; ++k) {
        const StepResult r = train_step(model, *opt, x, y, /*max_norm=*/1.0);
        INFO(variant << " step " << k);
        CHECK(std::abs(r.loss - losses.data()(k)) / losses.data()(k) < 1e-5);
        CHECK(std::abs(r.grad_norm - norms.data()(k)) / norms.data()(k) < 1e-4);
    }
}

}  // namespace gpt::testing
