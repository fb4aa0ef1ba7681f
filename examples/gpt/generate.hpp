// examples/gpt/generate.hpp — sampling text from a trained model, with or without a KV cache.
//
// Each step feeds the context, the last ≤ block ids (nanoGPT's crop), takes the last position's
// logits (V), divides them by the temperature, keeps the top_k largest (0: all), and draws the
// next id from their softmax.
//   recompute (kv_cache = false): the whole context through forward(), every step (nanoGPT's
//     generate): O(T) rows through every layer per token.
//   KV cache (kv_cache = true): the ids not yet seen through forward_cached(), one per step once
//     the prompt is in: O(1) rows per token. While the context fits in the block, the cache only
//     grows. Past it, the window slides by one position a step, and every position's embedding
//     (learned, sinusoidal) or context (rope, none: the first token no longer sees the dropped
//     one) changes, so no cached key stays valid: the cache is rebuilt from the cropped window
//     each step, at recompute's cost, and gives recompute's tokens exactly.
// Both give the same ids and logits (to rounding); tests/examples/test_gpt_generate.cpp checks it.
// ref: Karpathy, nanoGPT model.py, GPT.generate.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include "tokens.hpp"

namespace gpt {

struct GenerateOptions {
    int n = 100;               // new tokens
    double temperature = 1.0;  // > 0; logits are divided by it
    int top_k = 0;             // sample among the k likeliest (0: all)
    bool kv_cache = true;      // forward_cached (true) or forward over the whole context (false)
};

// What a generation did, for reports and tests.
struct GenerateStats {
    std::int64_t positions_run = 0;        // token positions run through the model, over all steps
    int rebuilds = 0;                      // steps whose window had slid, so the cache was refilled
    std::vector<std::size_t> cache_bytes;  // bytes each layer's KV cache allocated (empty: no cache)
};

// Continues `prompt` (ids in [0, V), at least one) by options.n ids drawn with `rng`, in eval
// mode (no dropout; the mode is restored after) and without a graph. When `logits` is given, it
// receives each step's last-position logits (V values, before the temperature); `stats`, what
// the run did. Throws ValueError for an empty prompt, n < 0 or a
// temperature ≤ 0 or not finite; IndexError for an id outside [0, V).
Ids generate(LanguageModel& model, const Ids& prompt, const GenerateOptions& options, std::mt19937_64& rng,
             std::vector<std::vector<real>>* logits = nullptr, GenerateStats* stats = nullptr);

// generate() on text: the prompt encoded with `tokens` (characters or byte pairs; an empty prompt
// starts from id 0), the new ids decoded. Throws std::runtime_error if the prompt has a character
// outside a character vocabulary.
std::string sample_text(LanguageModel& model, const Tokens& tokens, const std::string& prompt,
                        const GenerateOptions& options, std::mt19937_64& rng, GenerateStats* stats = nullptr);

}  // namespace gpt
