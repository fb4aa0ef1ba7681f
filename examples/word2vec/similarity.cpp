// examples/word2vec/similarity.cpp — the centred table, group means of cosines, Spearman's ρ; see similarity.hpp.
#include "similarity.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace word2vec {

using xgrad::Array;
using xgrad::real;

Array centred_rows(const Array& E) {
    const std::size_t V = E.shape()[0], d = E.shape()[1];
    std::vector<double> mean(d, 0.0);
    for (std::size_t r = 0; r < V; ++r)
        for (std::size_t j = 0; j < d; ++j) mean[j] += E.data()[r * d + j];
    Array out(E.shape());
    for (std::size_t r = 0; r < V; ++r)
        for (std::size_t j = 0; j < d; ++j)
            out.data()[r * d + j] = static_cast<real>(E.data()[r * d + j] - mean[j] / double(V));
    return out;
}

double mean_within(const Array& unit, const std::vector<std::int64_t>& ids) {
    double sum = 0;
    std::size_t pairs = 0;
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::size_t j = i + 1; j < ids.size(); ++j, ++pairs) sum += cosine(unit, ids[i], ids[j]);
    return pairs ? sum / double(pairs) : 0.0;
}

double mean_across(const Array& unit, const std::vector<std::int64_t>& ids_a, const std::vector<std::int64_t>& ids_b) {
    double sum = 0;
    for (const auto a : ids_a)
        for (const auto b : ids_b) sum += cosine(unit, a, b);
    const std::size_t pairs = ids_a.size() * ids_b.size();
    return pairs ? sum / double(pairs) : 0.0;
}

// Ranks 1..n of x, ties given the mean of the ranks they span.
static std::vector<double> ranks(const std::vector<double>& x) {
    std::vector<std::size_t> order(x.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return x[i] < x[j]; });
    std::vector<double> r(x.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
        const double mean_rank = 0.5 * double(i + j) + 1;  // ranks i+1 .. j+1 share their mean
        for (std::size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
        i = j + 1;
    }
    return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size() || a.size() < 2)
        throw std::invalid_argument("spearman: needs two samples of the same size >= 2, got " +
                                    std::to_string(a.size()) + " and " + std::to_string(b.size()));
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double mean = 0.5 * double(a.size() + 1);  // the mean rank, with or without ties
    double sab = 0, saa = 0, sbb = 0;                 // ρ = Σ(ra−m)(rb−m) / √(Σ(ra−m)² Σ(rb−m)²)
    for (std::size_t i = 0; i < a.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

}  // namespace word2vec
