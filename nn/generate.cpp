// nn/generate.cpp — the sampling loop (the rules: generate.hpp). A step's choice is sample_next;
// the cache's bookkeeping is the `window` in generate.
#include <xgrad/nn/generate.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include <xgrad/core/autograd.hpp>

namespace xgrad::nn {

Tensor CausalLM::forward_cached(const IndexTensor& /*ids*/, std::vector<KVCache>& /*caches*/) const {
    throw std::logic_error("CausalLM::forward_cached: this model has no KV cache (make_kv_caches returns none)");
}

namespace {

void check_options(const GenerationOptions& o, const char* op) {
    check(o.max_new_tokens() >= 0, op, "max_new_tokens must be >= 0; got {}", o.max_new_tokens());
    check(std::isfinite(o.temperature()) && o.temperature() > 0, op, "temperature must be finite and > 0; got {}",
          o.temperature());
    check(o.top_k() >= 0, op, "top_k must be >= 0 (0: all ids); got {}", o.top_k());
    check(o.top_p() > 0 && o.top_p() <= 1, op, "top_p must be in (0, 1] (1: all ids); got {}", o.top_p());
}

// Sets w[i] = 0 for every id outside the nucleus: the likeliest ids, in order, while the
// probability before each is < top_p (so their sum is the first to reach ≥ top_p; at least one).
// w holds unnormalised probabilities.
void keep_nucleus(std::vector<double>& w, double top_p) {
    std::vector<std::size_t> order(w.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    double before = 0;  // the probability of the ids kept so far
    for (std::size_t r = 0; r < order.size(); ++r) {
        if (r > 0 && before >= top_p) w[order[r]] = 0;
        before += w[order[r]] / total;
    }
}

}  // namespace

std::int64_t sample_next(const real* z_row, std::size_t V, const GenerationOptions& o, std::mt19937_64& rng) {
    check_options(o, "sample_next");
    check(V > 0, "sample_next", "the logits are empty (V = 0)");
    std::vector<double> z(z_row, z_row + V);
    for (std::size_t i = 0; i < V; ++i)
        check(!std::isnan(z[i]), "sample_next", "logit {} of {} is NaN: the model's output cannot be sampled", i, V);
    const auto largest = std::max_element(z.begin(), z.end());
    check(std::isfinite(*largest), "sample_next", "the largest logit is {}: the model's output cannot be sampled",
          *largest);
    if (!o.do_sample()) return std::int64_t(largest - z.begin());  // greedy
    // top-k: every logit below the k-th largest → −inf (ties with it stay).
    if (o.top_k() > 0 && std::size_t(o.top_k()) < V) {
        std::vector<double> sorted = z;
        std::nth_element(sorted.begin(), sorted.begin() + (o.top_k() - 1), sorted.end(), std::greater<double>());
        const double kth = sorted[std::size_t(o.top_k() - 1)];
        for (double& v : z)
            if (v < kth) v = -INFINITY;
    }
    // softmax((z − max z) / temperature), unnormalised (the distribution divides): subtracting first
    // keeps every exponent ≤ 0, so a tiny temperature gives e^0 = 1 for the largest and 0 for the
    // rest (greedy) instead of inf / inf.
    const double zmax = *std::max_element(z.begin(), z.end());  // finite: top-k keeps the largest
    for (double& v : z) v = std::exp((v - zmax) / o.temperature());
    if (o.top_p() < 1) keep_nucleus(z, o.top_p());
    std::discrete_distribution<std::int64_t> next(z.begin(), z.end());
    return next(rng);
}

namespace {

// ids[begin, end) as a (1, end − begin) batch.
IndexTensor row_of(const std::vector<std::int64_t>& ids, std::size_t begin, std::size_t end) {
    IndexArray x(ArrayShape{1, end - begin});
    std::copy(ids.begin() + std::ptrdiff_t(begin), ids.begin() + std::ptrdiff_t(end), x.data());
    return IndexTensor(std::move(x));
}

// Restores a module's training mode when it goes out of scope.
struct RestoreMode {
    Module& m;
    bool was_training;
    ~RestoreMode() { m.train(was_training); }
};

// The loop of both generate()s; `pick` turns a step's logits (V values) into the next id.
std::vector<std::int64_t> generate_with(CausalLM& model, const std::vector<std::int64_t>& prompt,
                                        const GenerationOptions& o, GenerationStats* stats,
                                        const std::function<std::int64_t(const real*, std::size_t)>& pick) {
    check(!prompt.empty(), "generate", "the prompt must hold at least one id");
    check_options(o, "generate");
    NoGradGuard no_grad;
    RestoreMode restore{model, model.is_training()};
    model.eval();  // no dropout while sampling
    const std::int64_t block_size = model.block_size();
    check(block_size >= 0, "generate", "the model's block_size() is {}; it must be >= 0 (0: no limit)", block_size);
    const std::size_t block = block_size == 0 ? SIZE_MAX : std::size_t(block_size);
    std::vector<KVCache> caches = o.use_cache() ? model.make_kv_caches() : std::vector<KVCache>{};
    const bool cached_run = !caches.empty();
    std::vector<std::int64_t> ids = prompt;
    std::size_t window = 0;  // with the cache: ids[window, window + cached) are in it, at positions 0, 1, ...
    GenerationStats run;
    run.record_logits = stats && stats->record_logits;
    for (std::int64_t step = 0; step < o.max_new_tokens(); ++step) {
        const std::size_t begin = ids.size() > block ? ids.size() - block : 0;  // the context: ≤ block ids
        Tensor out;
        if (!cached_run) {
            out = model.forward(row_of(ids, begin, ids.size()));  // (1, T, V), the whole context again
        } else {
            if (begin != window) {  // the window slid: every cached position is stale
                for (KVCache& c : caches) c.clear();
                window = begin;
                ++run.rebuilds;
            }
            const std::size_t cached = std::size_t(caches[0].length());
            out = model.forward_cached(row_of(ids, window + cached, ids.size()), caches);  // (1, t, V), the new ids
        }
        check(out.dim() == 3 && out.size(0) == 1 && out.size(1) >= 1, "generate",
              "the model's logits are {}; expected (1, T, V)", shape_str(out.shape()));
        const std::size_t V = std::size_t(out.size(2));
        for (std::int64_t s : o.stop_tokens())
            check(s >= 0 && std::size_t(s) < V, "generate", "stop token {} is outside [0, {})", s, V);
        run.positions_run += out.size(1);
        const real* last = out.data().data() + (std::size_t(out.size(1)) - 1) * V;  // the last position's row
        if (run.record_logits) run.logits.emplace_back(last, last + V);
        ids.push_back(pick(last, V));
        const auto& stop = o.stop_tokens();
        if (std::find(stop.begin(), stop.end(), ids.back()) != stop.end()) {
            run.stopped = true;
            break;
        }
    }
    for (const KVCache& c : caches) run.cache_bytes.push_back(c.bytes());
    if (stats) *stats = std::move(run);
    return std::vector<std::int64_t>(ids.begin() + std::ptrdiff_t(prompt.size()), ids.end());
}

}  // namespace

std::vector<std::int64_t> generate(CausalLM& model, const std::vector<std::int64_t>& prompt,
                                   const GenerationOptions& o, std::mt19937_64& rng, GenerationStats* stats) {
    return generate_with(model, prompt, o, stats,
                         [&](const real* z, std::size_t V) { return sample_next(z, V, o, rng); });
}

std::vector<std::int64_t> generate(CausalLM& model, const std::vector<std::int64_t>& prompt,
                                   const GenerationOptions& o, GenerationStats* stats) {
    return generate_with(model, prompt, o, stats, [&](const real* z, std::size_t V) {
        std::lock_guard<std::mutex> lock(generator_mutex());  // per draw: a forward may draw too
        return sample_next(z, V, o, generator());
    });
}

}  // namespace xgrad::nn
