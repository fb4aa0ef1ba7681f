// nn/generate.hpp — sampling text from any causal language model, with or without a KV cache.
//
// One step turns the last position's logits z (V,) into the next id: z / temperature, then top-k
// (the k largest), then top-p (the likeliest ids whose probabilities first reach p), softmax, one
// draw (argmax when do_sample is off); the id is appended and the context cropped to its last
// `block` ids (nanoGPT's generate). Without a cache every step runs the whole context, O(T) rows
// per token; with one, the new ids only, O(1), until the window slides past the block: then every
// cached key is stale (its position or context changed) and the cache is refilled from the
// cropped window, at recompute's cost and with recompute's ids exactly.
// ref: Karpathy, nanoGPT model.py, GPT.generate; Hugging Face transformers, GenerationConfig and
//      its Temperature-, TopK- and TopPLogitsWarper (in that order); Holtzman et al. 2020 (top-p).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include <xgrad/nn/kv_cache.hpp>
#include <xgrad/nn/module.hpp>

namespace xgrad::nn {

// What generate() needs of a model: derive from CausalLM instead of Module and implement
// forward (and block_size when the model has a longest context). A model with a KV cache also
// overrides make_kv_caches and forward_cached.
class CausalLM : public Module {
public:
    // ids (B, T) int64 in [0, V) → logits (B, T, V), position t seeing ids [0, t] only.
    virtual Tensor forward(const IndexTensor& ids) const = 0;
    // The longest context forward takes; generate crops to it. 0: no limit.
    virtual std::int64_t block_size() const { return 0; }
    // One empty cache per layer; empty (the default): the model has no cache, generate recomputes.
    virtual std::vector<KVCache> make_kv_caches() const { return {}; }
    // ids (B, t) at positions P .. P + t − 1 after the P = caches[0].length() already cached →
    // their logits (B, t, V), equal to the last t rows of forward() on all P + t ids; appends
    // their keys and values. The default throws std::logic_error (no cache).
    virtual Tensor forward_cached(const IndexTensor& ids, std::vector<KVCache>& caches) const;
};

// How generate() picks each id; setters chain, as LibTorch's options:
//   nn::GenerationOptions().max_new_tokens(200).temperature(0.8).top_k(40).top_p(0.95)
class GenerationOptions {
public:
    GenerationOptions& max_new_tokens(std::int64_t v) { max_new_tokens_ = v; return *this; }
    GenerationOptions& temperature(double v) { temperature_ = v; return *this; }
    GenerationOptions& top_k(std::int64_t v) { top_k_ = v; return *this; }
    GenerationOptions& top_p(double v) { top_p_ = v; return *this; }
    GenerationOptions& do_sample(bool v) { do_sample_ = v; return *this; }
    GenerationOptions& stop_tokens(std::vector<std::int64_t> v) { stop_tokens_ = std::move(v); return *this; }
    GenerationOptions& use_cache(bool v) { use_cache_ = v; return *this; }

    std::int64_t max_new_tokens() const { return max_new_tokens_; }  // ≥ 0 ids appended at most
    double temperature() const { return temperature_; }    // finite, > 0: logits are divided by it
    std::int64_t top_k() const { return top_k_; }          // ≥ 0: keep the k likeliest ids; 0 = all
    double top_p() const { return top_p_; }                // in (0, 1]: the nucleus; 1 = all
    bool do_sample() const { return do_sample_; }          // false: the likeliest id (greedy)
    const std::vector<std::int64_t>& stop_tokens() const { return stop_tokens_; }  // end after one of these
    bool use_cache() const { return use_cache_; }          // forward_cached when the model has a cache

private:
    std::int64_t max_new_tokens_ = 100;
    double temperature_ = 1.0;
    std::int64_t top_k_ = 0;
    double top_p_ = 1.0;
    bool do_sample_ = true;
    std::vector<std::int64_t> stop_tokens_;
    bool use_cache_ = true;
};

// What a generation did, for reports and tests.
struct GenerationStats {
    std::int64_t positions_run = 0;        // token positions run through the model, over all steps
    int rebuilds = 0;                      // steps whose window had slid, so the cache was refilled
    std::vector<std::size_t> cache_bytes;  // bytes each layer's KV cache allocated (empty: no cache)
    bool stopped = false;                  // ended on a stop token, before max_new_tokens
    std::vector<std::vector<real>> logits; // with record_logits: each step's last-position logits (V,)
    bool record_logits = false;            // set before the call to fill `logits`
};

// Continues `prompt` (ids in [0, V), at least one) by up to max_new_tokens ids drawn with `rng`,
// and returns the new ids (a stop token, when one ends the run, included last). Runs without a
// graph and in eval mode (no dropout), the model's mode restored after. The draw is
// std::discrete_distribution's, which equals torch.multinomial(probs, 1) in distribution.
// Throws ValueError for an empty prompt, max_new_tokens < 0, a temperature ≤ 0 or not finite,
// top_k < 0, top_p outside (0, 1], a stop token outside [0, V), or a model whose logits are not
// (1, T, V); IndexError (from the model) for a prompt id outside [0, V).
std::vector<std::int64_t> generate(CausalLM& model, const std::vector<std::int64_t>& prompt,
                                   const GenerationOptions& options, std::mt19937_64& rng,
                                   GenerationStats* stats = nullptr);
// The same drawing from xgrad's process-wide generator (core/tensor.hpp: manual_seed).
std::vector<std::int64_t> generate(CausalLM& model, const std::vector<std::int64_t>& prompt,
                                   const GenerationOptions& options, GenerationStats* stats = nullptr);

// One step's choice on its own, for a loop of one's own: logits z (V values) → the next id, by the
// rules above. Throws ValueError for the options' errors above, V = 0, a NaN logit, and a largest
// logit that is not finite (all −inf, or an overflow to +inf), sampling or greedy.
std::int64_t sample_next(const real* logits, std::size_t V, const GenerationOptions& options, std::mt19937_64& rng);

}  // namespace xgrad::nn
