// examples/gpt/generate.cpp — sample_text: encode, nn::generate, decode.
#include "generate.hpp"

namespace gpt {

std::string sample_text(LanguageModel& model, const Tokens& tokens, const std::string& prompt,
                        const nn::GenerationOptions& options, std::mt19937_64& rng, nn::GenerationStats* stats) {
    Ids ids = tokens.encode(prompt);
    if (ids.empty()) ids.push_back(0);
    return tokens.decode(nn::generate(model, ids, options, rng, stats));
}

}  // namespace gpt
