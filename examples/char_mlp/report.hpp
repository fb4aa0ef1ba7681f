// examples/char_mlp/report.hpp — what a char_mlp run shows: losses, samples, embedding neighbours.
// (The loss log, progress line and loss curve are examples/common/run_log.hpp.)
#pragma once

#include <random>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"

namespace char_mlp {

// Mean cross-entropy (nats) of the model over every example, without building a graph.
double evaluate(const CharMLP& model, const Examples& data);

// Samples one word: start from '.'·block, draw the next id from softmax(logits), stop at '.'.
std::string sample_word(const CharMLP& model, int block, std::mt19937_64& rng);

// For each letter in `letters`, its `k` nearest letters by cosine similarity of their rows
// in the embedding table; then the mean cosine among the vowels a e i o u against the mean
// cosine between a vowel and a consonant.
void print_neighbours(const CharMLP& model, const std::string& letters, int k);

}  // namespace char_mlp
