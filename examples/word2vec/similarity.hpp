// examples/word2vec/similarity.hpp — reading a trained embedding table: cosine similarity,
// nearest neighbours, and the within-group against cross-group check of the seed lessons.
//
//   cos(a, b) = a·b / (‖a‖ ‖b‖)   ∈ [−1, 1]: 1 for the same direction, 0 for orthogonal
//
// Legend: V vocabulary size, d embedding width.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/core/tensor.hpp>

#include "common/similarity.hpp"

namespace word2vec {

// unit_rows, cosine and nearest (examples/common/similarity.hpp), which gpt reads its tokens with too.
using examples::cosine;
using examples::nearest;
using examples::unit_rows;

// E minus its mean row: e_w − (1/V) Σ_u e_u.   (V, d)
// Skip-gram vectors share a common direction: the negatives of every centre c come from the
// same P_n, so every v_c gets, on average, the same push −k·E_{n~P_n}[σ(u_n·v_c) u_n], and the
// model has no bias term to absorb it. This lifts the cosine of any two words.
// Removing the mean is the first step of "all-but-the-top" (Mu & Viswanath 2018); after it a
// random pair of words has a mean cosine near 0, so group differences are easier to read.
xgrad::Array centred_rows(const xgrad::Array& E);

// Mean cosine over all unordered pairs {a, b}, a ≠ b, within `ids`; and over all pairs
// (a ∈ ids_a, b ∈ ids_b) across two groups.
double mean_within(const xgrad::Array& unit, const std::vector<std::int64_t>& ids);
double mean_across(const xgrad::Array& unit, const std::vector<std::int64_t>& ids_a,
                   const std::vector<std::int64_t>& ids_b);

// Spearman's rank correlation ρ ∈ [−1, 1] of two equally long samples: the Pearson correlation
// of their ranks, tied values sharing the mean of their ranks (as scipy.stats.spearmanr does).
// +1 when b grows with a, −1 when it shrinks, near 0 when the order of a says nothing about b.
// Used for "rare words barely move" (pictures.hpp). Throws std::invalid_argument if the sizes
// differ or are below 2. ref: Spearman (1904); scipy.stats.spearmanr documentation.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace word2vec
