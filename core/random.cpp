// core/random.cpp — random sampling: multinomial.
//
// Legend: probs (C,) or (N, C) non-negative weights, N rows of C categories; S = num_samples.
// Each row is a categorical distribution P(c) = w_c / Σ_c' w_c'.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include <xgrad/core/random.hpp>

namespace xgrad {

// Checks one row of C weights for what torch.multinomial refuses.
static void check_multinomial_row(const real* w, std::size_t C, std::size_t row, std::int64_t num_samples,
                                bool replacement) {
    double total = 0;
    std::int64_t nonzero = 0;
    for (std::size_t c = 0; c < C; ++c) {
        check(std::isfinite(w[c]) && w[c] >= 0, "multinomial",
              "probability tensor contains either inf, nan or element < 0: {} at row {}, category {}", w[c], row, c);
        total += w[c];
        nonzero += w[c] > 0;
    }
    check(total > 0, "multinomial", "invalid multinomial distribution (sum of probabilities <= 0) in row {}", row);
    check(replacement || num_samples <= nonzero, "multinomial",
          "invalid multinomial distribution (with replacement=false, not enough categories of non-zero weight "
          "to sample): row {} has {}, num_samples is {}",
          row, nonzero, num_samples);
}

// One draw: the first category c with w_0 + ... + w_c > u, for u uniform in [0, Σ w). A category of
// weight 0 is never drawn (its running sum equals the one before it). If rounding leaves u at or
// above the last running sum, the last category of non-zero weight is drawn.
static std::size_t draw_category(const std::vector<double>& w, std::mt19937_64& gen) {
    double total = 0;
    for (double v : w) total += v;
    const double u = std::uniform_real_distribution<double>(0.0, total)(gen);
    double running = 0;
    std::size_t last_nonzero = 0;
    for (std::size_t c = 0; c < w.size(); ++c) {
        if (w[c] == 0) continue;
        running += w[c];
        last_nonzero = c;
        if (running > u) return c;
    }
    return last_nonzero;
}

// ---- multinomial -----------------------------------------------------------------------------------
// with replacement   : S independent draws from P(c) = w_c / Σ w
// without replacement: draw c_1 from P, set w_{c_1} = 0, draw c_2 from the renormalised rest, ...
//                      so P(c_1 = i, c_2 = j) = p_i · p_j / (1 − p_i)
// ref: PyTorch docs, torch.multinomial
IndexTensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, std::mt19937_64& gen) {
    check(probs.dim() == 1 || probs.dim() == 2, "multinomial", "prob_dist must be 1 or 2 dim; got shape {}",
          shape_str(probs.shape()));
    const auto C = static_cast<std::size_t>(probs.size(-1));
    const std::size_t N = probs.dim() == 2 ? static_cast<std::size_t>(probs.size(0)) : 1;
    check(C > 0, "multinomial", "needs at least one category; got shape {}", shape_str(probs.shape()));
    check(num_samples > 0, "multinomial", "cannot sample n_sample <= 0 samples; got {}", num_samples);
    check(replacement || num_samples <= static_cast<std::int64_t>(C), "multinomial",
          "cannot sample n_sample > prob_dist.size(-1) samples without replacement: {} > {}", num_samples, C);
    check(static_cast<std::uint64_t>(num_samples) <= kMaxNumel / std::max<std::size_t>(N, 1), "multinomial",
          "{} rows × num_samples {} exceeds the 2^60 elements a tensor holds", N, num_samples);
    for (std::size_t r = 0; r < N; ++r)  // every row checked before the first draw
        check_multinomial_row(probs.data().data() + r * C, C, r, num_samples, replacement);

    const auto S = static_cast<std::size_t>(num_samples);
    IndexArray out(probs.dim() == 2 ? ArrayShape{N, S} : ArrayShape{S});
    for (std::size_t r = 0; r < N; ++r) {
        const real* row = probs.data().data() + r * C;
        std::vector<double> w(row, row + C);
        for (std::size_t s = 0; s < S; ++s) {
            const std::size_t c = draw_category(w, gen);
            out.data()[r * S + s] = static_cast<std::int64_t>(c);
            if (!replacement) w[c] = 0;  // removed; the next draw renormalises over the rest
        }
    }
    return IndexTensor(std::move(out));
}

IndexTensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement) {
    std::lock_guard<std::mutex> lock(generator_mutex());
    return multinomial(probs, num_samples, replacement, generator());
}

}  // namespace xgrad
