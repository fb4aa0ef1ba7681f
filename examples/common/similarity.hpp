// examples/common/similarity.hpp — reading a trained embedding table: cosine similarity and the
// nearest rows (word2vec's words, gpt's tokens).
//
//   cos(a, b) = a·b / (‖a‖ ‖b‖)   ∈ [−1, 1]: 1 for the same direction, 0 for orthogonal
//
// Legend: V rows (the vocabulary), d embedding width.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace examples {

// Each row of E (V, d) divided by its length, so that a dot product of two rows is their
// cosine. A zero row stays zero (its cosine with anything is then 0).   (V, d)
xgrad::Array unit_rows(const xgrad::Array& E);

// cos(row a, row b) of a unit_rows() table.
double cosine(const xgrad::Array& unit, std::int64_t a, std::int64_t b);

// The n rows most similar to row `query` (itself excluded), best first: (ID, cosine).
std::vector<std::pair<std::int64_t, double>> nearest(const xgrad::Array& unit, std::int64_t query, std::size_t n);

}  // namespace examples
