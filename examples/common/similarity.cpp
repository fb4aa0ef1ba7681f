// examples/common/similarity.cpp — cosine similarity on a (V, d) table; see similarity.hpp.
#include "common/similarity.hpp"

#include <algorithm>
#include <cmath>

namespace examples {

using xgrad::Array;
using xgrad::real;

Array unit_rows(const Array& E) {
    const std::size_t V = E.shape()[0], d = E.shape()[1];
    Array unit(E.shape());
    for (std::size_t r = 0; r < V; ++r) {
        const real* e = E.data() + r * d;
        double sq = 0;  // ‖e‖², accumulated in double
        for (std::size_t j = 0; j < d; ++j) sq += double(e[j]) * e[j];
        const double scale = sq > 0 ? 1 / std::sqrt(sq) : 0.0;
        for (std::size_t j = 0; j < d; ++j) unit.data()[r * d + j] = static_cast<real>(e[j] * scale);
    }
    return unit;
}

double cosine(const Array& unit, std::int64_t a, std::int64_t b) {
    const std::size_t d = unit.shape()[1];
    const real* x = unit.data() + std::size_t(a) * d;
    const real* y = unit.data() + std::size_t(b) * d;
    double dot = 0;
    for (std::size_t j = 0; j < d; ++j) dot += double(x[j]) * y[j];
    return dot;
}

std::vector<std::pair<std::int64_t, double>> nearest(const Array& unit, std::int64_t query, std::size_t n) {
    const auto V = static_cast<std::int64_t>(unit.shape()[0]);
    std::vector<std::pair<std::int64_t, double>> all;
    all.reserve(std::size_t(V));
    for (std::int64_t w = 0; w < V; ++w)
        if (w != query) all.emplace_back(w, cosine(unit, query, w));
    n = std::min(n, all.size());
    std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    all.resize(n);
    return all;
}

}  // namespace examples
