// examples/word2vec/pictures.hpp — three PNGs of a trained table, drawn with gnuplot.
//
//   similarity_heatmap.png  cos(v_a − mean, v_b − mean) for every pair of the group words
//                           (animals, then numbers): two bright blocks on the diagonal if each
//                           group is closer to itself than to the other
//   pca.png                 the group words and a few nearest neighbours of each, projected on
//                           the two principal axes of their (centred) vectors, labelled
//   rare_tokens.png         ‖v_w − v_w(initial)‖ against count(w), log x: how far each row of
//                           the input table moved in training, against how often it was seen
//
// Each function writes NAME.dat and NAME.gp (io::write_file_atomically) and NAME.png into `dir`
// and returns the line(s) to print (without gnuplot, only the .dat); a file that cannot be written
// throws std::runtime_error naming its path and the reason.
//
// Legend: V vocabulary size, d vector width, n words in a picture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>
#include "corpus.hpp"

namespace word2vec {

// The n × n cosine matrix of `ids` (in the given order) on the centred table E − mean(E) (V, d).
std::string plot_group_heatmap(const std::string& dir, const Vocab& vocab, const xgrad::Array& E,
                               const std::vector<std::int64_t>& ids, std::size_t first_group_size);

// `groups` (each a list of IDs, drawn in its own colour) plus the `neighbours` nearest words of
// each group word, projected onto the top two principal components of their centred vectors.
// PCA: the eigenvectors of the d × d covariance Xᵀ X / (n − 1) of those n rows (X centred on
// its column means) with the two largest eigenvalues (xt::linalg::eigh, LAPACK's syevd).
// Also prints the share of the variance the two axes keep, and a warning against reading
// distances off a 2-D projection.
std::string plot_pca(const std::string& dir, const Vocab& vocab, const xgrad::Array& E,
                     const std::vector<std::vector<std::int64_t>>& groups, const std::vector<std::string>& group_names,
                     std::size_t neighbours);

// "Rare tokens get poor embeddings": for every word w, moved(w) = ‖E[w] − E0[w]‖₂ (E0 the table
// before training, (V, d)), plotted against count(w) on a log-x axis; prints Spearman's ρ of
// (count, moved) and the median movement per band of counts.
std::string plot_rare_tokens(const std::string& dir, const Vocab& vocab, const xgrad::Array& E0,
                             const xgrad::Array& E);

}  // namespace word2vec
