// examples/word2vec/pictures.cpp — the heatmap, the PCA scatter and the rare-token scatter
// (see pictures.hpp).
#include "pictures.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include <xgrad/io/atomic_file.hpp>

#include "common/gnuplot.hpp"
#include "similarity.hpp"

namespace word2vec {

using examples::gnuplot_quote;
using examples::run_gnuplot;
using xgrad::Array;

std::string plot_group_heatmap(const std::string& dir, const Vocab& vocab, const Array& E,
                               const std::vector<std::int64_t>& ids, std::size_t first_group_size) {
    const Array unit = unit_rows(centred_rows(E));  // rows of E − mean(E), scaled to length 1
    const std::size_t n = ids.size();
    // similarity_heatmap.dat: one line per cell, "column row cosine", rows of the matrix separated by a blank
    // line (gnuplot's grid format for `with image`); row 0 is drawn at the top.
    std::string dat;
    for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < n; ++c)
            fmt::format_to(std::back_inserter(dat), "{} {} {:.4f}\n", c, r, r == c ? 1.0 : cosine(unit, ids[r], ids[c]));
        dat += '\n';
    }
    xgrad::io::write_file_atomically(dir + "/similarity_heatmap.dat", dat, "plot_group_heatmap");
    std::string tics;
    for (std::size_t i = 0; i < n; ++i)
        tics += fmt::format("{}{} {}", i ? ", " : "", gnuplot_quote(vocab.words[std::size_t(ids[i])]), i);
    const double edge = double(first_group_size) - 0.5;  // the line between the two groups
    std::ostringstream gp;
    gp << "set terminal pngcairo size 760,680 noenhanced\n"
       << "set output " << gnuplot_quote(dir + "/similarity_heatmap.png") << "\n"
       << "set title 'word2vec: cosine similarity of the group words (vectors minus their mean)'\n"
       << "set xtics (" << tics << ") rotate by 45 right\nset ytics (" << tics << ")\n"
       << "set yrange [" << n - 0.5 << ":-0.5]\nset xrange [-0.5:" << n - 0.5 << "]\n"
       << "set cbrange [-1:1]\nset palette defined (-1 '#2c5d9f', 0 'white', 1 '#c0392b')\n"
       << "set cblabel 'cosine'\nset size ratio -1\nunset key\n"
       << fmt::format("set arrow from {0},-0.5 to {0},{1} nohead lw 2\n", edge, n - 0.5)
       << fmt::format("set arrow from -0.5,{0} to {1},{0} nohead lw 2\n", edge, n - 0.5)
       << "plot " << gnuplot_quote(dir + "/similarity_heatmap.dat") << " using 1:2:3 with image, \\\n"
       << "     '' using 1:2:(sprintf('%.2f', $3)) with labels font ',8'\n";
    return run_gnuplot(dir + "/similarity_heatmap.gp", gp.str(), dir + "/similarity_heatmap.png",
                       "heatmap of the group cosines");
}

std::string plot_pca(const std::string& dir, const Vocab& vocab, const Array& E,
                     const std::vector<std::vector<std::int64_t>>& groups, const std::vector<std::string>& group_names,
                     std::size_t neighbours) {
    // The words to draw: every group word (colour = its group), then the nearest neighbours of
    // each that are not already drawn (colour = "neighbour").
    const Array unit = unit_rows(E);
    std::vector<std::int64_t> words;
    std::vector<std::size_t> colour;
    std::set<std::int64_t> seen;
    for (std::size_t g = 0; g < groups.size(); ++g)
        for (auto id : groups[g])
            if (seen.insert(id).second) words.push_back(id), colour.push_back(g);
    for (const auto& group : groups)
        for (auto id : group)
            for (const auto& [nb, cos] : nearest(unit, id, neighbours))
                if (seen.insert(nb).second) words.push_back(nb), colour.push_back(groups.size());

    // X (n, d): the chosen rows, centred on their own mean. C = Xᵀ X / (n − 1) (d, d).
    const std::size_t n = words.size(), d = E.shape()[1];
    xt::xtensor<double, 2> X({n, d});
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < d; ++j) X(i, j) = E(std::size_t(words[i]), j);
    X -= xt::view(xt::mean(X, {0}), xt::newaxis(), xt::all());
    const xt::xtensor<double, 2> C = xt::linalg::dot(xt::transpose(X), X) / double(n - 1);
    // eigh: eigenvalues ascending, eigenvectors in the columns; the last two are the top two.
    const auto [eigenvalues, eigenvectors] = xt::linalg::eigh(C);
    const xt::xtensor<double, 2> axes = xt::view(eigenvectors, xt::all(), xt::range(d - 1, d - 3, -1));  // (d, 2)
    const xt::xtensor<double, 2> P = xt::linalg::dot(X, axes);                                       // (n, 2)
    const double total = xt::sum(eigenvalues)();
    const double kept = (eigenvalues(d - 1) + eigenvalues(d - 2)) / total;

    std::string dat;  // "x y colour word"
    for (std::size_t i = 0; i < n; ++i)
        fmt::format_to(std::back_inserter(dat), "{:.5f} {:.5f} {} {}\n", P(i, 0), P(i, 1), colour[i],
                       vocab.words[std::size_t(words[i])]);
    xgrad::io::write_file_atomically(dir + "/pca.dat", dat, "plot_pca");
    const char* colours[] = {"#c0392b", "#2c5d9f", "#7f8c8d"};
    std::ostringstream gp;
    gp << "set terminal pngcairo size 900,700 noenhanced\n"
       << "set output " << gnuplot_quote(dir + "/pca.png") << "\n"
       << fmt::format("set title 'word2vec: {} words on their top two principal axes ({:.0f}% of their variance)'\n", n,
                      100 * kept)
       << "set xlabel 'PC1'\nset ylabel 'PC2'\nset grid\nset key bottom right box opaque\n"
       << "plot ";
    for (std::size_t g = 0; g <= groups.size(); ++g) {
        const std::string name = g < groups.size() ? group_names[g] : fmt::format("{} nearest neighbours", neighbours);
        gp << fmt::format("{0} using ($3 == {1} ? $1 : 1/0):2 with points pt 7 ps 1.2 lc rgb '{2}' title {3}, \\\n"
                          "     '' using ($3 == {1} ? $1 : 1/0):2:4 with labels offset 0.6,0.6 left tc rgb '{2}' notitle{4}",
                          gnuplot_quote(dir + "/pca.dat"), g, colours[std::min<std::size_t>(g, 2)], gnuplot_quote(name),
                          g < groups.size() ? ", \\\n     " : "\n");
    }
    std::string note = run_gnuplot(dir + "/pca.gp", gp.str(), dir + "/pca.png", "PCA scatter");
    note += fmt::format("\n  the two axes keep {:.0f}% of the variance of these {} words in d = {}: a 2-D projection "
                        "distorts distances, so do not over-read it (the cosines above are the measurement)",
                        100 * kept, n, d);
    return note;
}

std::string plot_rare_tokens(const std::string& dir, const Vocab& vocab, const Array& E0, const Array& E) {
    const std::size_t V = E.shape()[0], d = E.shape()[1];
    std::vector<double> count(V), moved(V), relative(V);
    std::string dat;  // "count moved relative word"
    for (std::size_t w = 0; w < V; ++w) {
        double sq = 0, sq0 = 0;  // ‖E[w] − E0[w]‖², ‖E0[w]‖²
        for (std::size_t j = 0; j < d; ++j) {
            const double delta = double(E(w, j)) - double(E0(w, j));
            sq += delta * delta, sq0 += double(E0(w, j)) * double(E0(w, j));
        }
        count[w] = double(vocab.counts[w]), moved[w] = std::sqrt(sq), relative[w] = std::sqrt(sq / sq0);
        fmt::format_to(std::back_inserter(dat), "{} {:.5f} {:.3f} {}\n", vocab.counts[w], moved[w], relative[w],
                       vocab.words[w]);
    }
    xgrad::io::write_file_atomically(dir + "/rare_tokens.dat", dat, "plot_rare_tokens");

    // The median movement in bands of counts: the same trend as ρ, in units one can read.
    std::string bands;
    const double edges[] = {0, 10, 30, 100, 1000, 1e12};
    const double initial_norm = std::sqrt(double(d) / 12) / double(d);  // E‖v_initial‖, v ~ U[−0.5/d, 0.5/d)^d
    double rarest_median = -1, rarest_low = 0;
    for (int b = 0; b < 5; ++b) {
        std::vector<double> in_band;
        double low = 1e300;  // the smallest count in the band (min_count cuts the first band)
        for (std::size_t w = 0; w < V; ++w)
            if (count[w] >= edges[b] && count[w] < edges[b + 1]) in_band.push_back(moved[w]), low = std::min(low, count[w]);
        if (in_band.empty()) continue;
        std::nth_element(in_band.begin(), in_band.begin() + std::ptrdiff_t(in_band.size() / 2), in_band.end());
        const double median = in_band[in_band.size() / 2];
        if (rarest_median < 0) rarest_median = median, rarest_low = low;
        bands += fmt::format("\n    count {:>11}: {:5} words, median ‖v − v_initial‖ = {:.3f}",
                             b < 4 ? fmt::format("{}–{}", low, edges[b + 1] - 1) : fmt::format(">= {}", edges[b]),
                             in_band.size(), median);
    }
    const double rho = spearman(count, moved);
    std::ostringstream gp;
    gp << "set terminal pngcairo size 900,600 noenhanced\n"
       << "set output " << gnuplot_quote(dir + "/rare_tokens.png") << "\n"
       << fmt::format("set title 'word2vec: how far each input vector moved from its random start (Spearman rho = {:.2f})'\n", rho)
       << "set logscale x\nset xrange [3:*]\nset xlabel 'count of the word in the corpus (log scale)'\n"
       << "set ylabel '|v - v_initial| (L2)'\nset grid\nunset key\n"
       << "plot " << gnuplot_quote(dir + "/rare_tokens.dat") << " using 1:2 with points pt 7 ps 0.4 lc rgb '#2c5d9f'\n";
    std::string note = run_gnuplot(dir + "/rare_tokens.gp", gp.str(), dir + "/rare_tokens.png", "rare-token scatter");
    note += fmt::format("\n  Spearman rank correlation of (count, ‖v − v_initial‖) over the V = {} words: rho = {:.3f}"
                        "\n  ‖v_initial‖ is about {:.3f} (U[-0.5/d, 0.5/d) in d = {}); by count:{}",
                        V, rho, initial_norm, d, bands);
    // What the numbers say about "a rare token hardly moves from its random start".
    const double ratio = rarest_median / initial_norm;
    if (ratio > 3)
        note += fmt::format("\n  the rarest words here (seen {:.0f}+ times) moved {:.0f}x their initial length: they did not "
                            "stay near their random start.\n  Adam scales every row's step to about lr per coordinate "
                            "however small its gradient, so few updates still move a row far;\n  a rare word's vector is "
                            "built from few contexts (noisy), not left where it started.",
                            rarest_low, ratio);
    else
        note += fmt::format("\n  the rarest words here (seen {:.0f}+ times) moved only {:.1f}x their initial length: they "
                            "stayed near their random start, as the claim says.",
                            rarest_low, ratio);
    return note;
}

}  // namespace word2vec
