// examples/gpt/generate.hpp — sampling text: nn::generate (nn/generate.hpp) on ids, with the
// run's tokens (characters or byte pairs) on either side.
#pragma once

#include <random>
#include <string>

#include <xgrad/nn/generate.hpp>

#include "data.hpp"
#include "model.hpp"
#include "tokens.hpp"

namespace gpt {

// nn::generate on text: the prompt encoded with `tokens` (an empty prompt starts from id 0), the
// new ids decoded. Throws std::runtime_error if the prompt has a character outside a character
// vocabulary; nn::generate's errors else.
std::string sample_text(LanguageModel& model, const Tokens& tokens, const std::string& prompt,
                        const nn::GenerationOptions& options, std::mt19937_64& rng,
                        nn::GenerationStats* stats = nullptr);

}  // namespace gpt
