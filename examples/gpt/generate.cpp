// examples/gpt/generate.cpp — the sampling loop; the cache's bookkeeping is the `window` below.
#include "generate.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace gpt {

namespace {

// ids[begin, end) as a (1, end − begin) batch.
IndexTensor row_of(const Ids& ids, std::size_t begin, std::size_t end) {
    IndexArray x(ArrayShape{1, end - begin});
    std::copy(ids.begin() + std::ptrdiff_t(begin), ids.begin() + std::ptrdiff_t(end), x.data());
    return IndexTensor(std::move(x));
}

// One id drawn from softmax(z / temperature) over the top_k largest z (all when top_k is 0).
std::int64_t draw(const real* z_row, std::size_t V, const GenerateOptions& o, std::mt19937_64& rng) {
    std::vector<double> z(z_row, z_row + V);
    if (o.top_k > 0 && std::size_t(o.top_k) < V) {  // keep the k largest logits
        std::vector<double> sorted = z;
        std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<double>());
        const double kth = sorted[std::size_t(o.top_k - 1)];
        for (double& v : z)
            if (v < kth) v = -INFINITY;
    }
    // softmax((z − max z) / temperature), unnormalised (the distribution divides): subtracting first
    // keeps every exponent ≤ 0, so a tiny temperature gives e^0 = 1 for the largest and 0 for the
    // rest (greedy) instead of inf / inf.
    const double zmax = *std::max_element(z.begin(), z.end());
    for (double& v : z) v = std::exp((v - zmax) / o.temperature);
    std::discrete_distribution<std::int64_t> next(z.begin(), z.end());
    return next(rng);
}

}  // namespace

Ids generate(LanguageModel& model, const Ids& prompt, const GenerateOptions& o, std::mt19937_64& rng,
             std::vector<std::vector<real>>* logits, GenerateStats* stats) {
    check(!prompt.empty(), "generate", "the prompt must hold at least one id");
    check(o.n >= 0, "generate", "n must be >= 0; got {}", o.n);
    check(std::isfinite(o.temperature) && o.temperature > 0, "generate", "temperature must be finite and > 0; got {}",
          o.temperature);
    NoGradGuard no_grad;
    EvalMode eval_mode(model);  // no dropout while sampling
    const std::size_t block = std::size_t(model.config().block), V = std::size_t(model.config().vocab);
    Ids ids = prompt;
    std::vector<nn::KVCache> caches = model.make_kv_caches();
    std::size_t window = 0;  // with the cache: ids[window, window + cached) are in it, at positions 0, 1, ...
    GenerateStats run;
    for (int step = 0; step < o.n; ++step) {
        const std::size_t begin = ids.size() > block ? ids.size() - block : 0;  // the context: ≤ block ids
        Tensor out;
        if (!o.kv_cache) {
            out = model.forward(row_of(ids, begin, ids.size()));  // (1, T, V), the whole context again
        } else {
            if (begin != window) {  // the window slid: every cached position is stale
                for (nn::KVCache& c : caches) c.clear();
                window = begin;
                ++run.rebuilds;
            }
            const std::size_t cached = std::size_t(caches[0].length());
            out = model.forward_cached(row_of(ids, window + cached, ids.size()), caches);  // (1, t, V), the new ids
        }
        run.positions_run += out.size(1);
        const real* last = out.data().data() + (std::size_t(out.size(1)) - 1) * V;  // the last position's row
        if (logits) logits->emplace_back(last, last + V);
        ids.push_back(draw(last, V, o, rng));
    }
    if (o.kv_cache)
        for (const nn::KVCache& c : caches) run.cache_bytes.push_back(c.bytes());
    if (stats) *stats = run;
    return Ids(ids.begin() + std::ptrdiff_t(prompt.size()), ids.end());
}

std::string sample_text(LanguageModel& model, const Tokens& tokens, const std::string& prompt,
                        const GenerateOptions& options, std::mt19937_64& rng, GenerateStats* stats) {
    Ids ids = tokens.encode(prompt);
    if (ids.empty()) ids.push_back(0);
    return tokens.decode(generate(model, ids, options, rng, nullptr, stats));
}

}  // namespace gpt
