// tests/nn/test_generate.cpp — nn/generate: one step's choice (temperature, top-k, top-p, greedy)
// against hand-computed distributions, and the loop on a model of one's own: the crop at the
// block, stop tokens, the seeded generators, the refusals. The KV cache against recompute, on the
// GPT and LLaMA models: tests/examples/test_gpt_generate.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <xgrad/nn/generate.hpp>

#include "test_helpers.hpp"

namespace test_generate {
using namespace xgrad;
using Catch::Matchers::Contains;

namespace {

// Frequencies of sample_next's ids over n draws.
std::map<std::int64_t, double> frequencies(const std::vector<real>& z, const nn::GenerationOptions& o, int n) {
    std::mt19937_64 rng(2024);
    std::map<std::int64_t, double> f;
    for (int i = 0; i < n; ++i) f[nn::sample_next(z.data(), z.size(), o, rng)] += 1.0 / n;
    return f;
}

// |frequency − p| within 5 binomial standard deviations over n draws, for every id (absent: 0).
void require_distribution(const std::map<std::int64_t, double>& f, const std::vector<double>& p, int n) {
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double got = f.count(std::int64_t(i)) ? f.at(std::int64_t(i)) : 0.0;
        const double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
        INFO("id " << i << ": frequency " << got << ", probability " << p[i]);
        REQUIRE(std::abs(got - p[i]) <= 5 * sigma + 1e-12);
    }
}

// A model of one's own: the next id's logits depend on the last id only (a bigram table, (V, V)),
// and its forward refuses a context longer than its block, as a learned position table would.
class Bigram : public nn::CausalLM {
public:
    Bigram(std::vector<std::vector<real>> table, std::int64_t block) : table_(std::move(table)), block_(block) {}
    Tensor forward(const IndexTensor& ids) const override {
        check(ids.size(1) <= block_, "Bigram", "T = {} exceeds the block {}", ids.size(1), block_);
        const std::size_t T = std::size_t(ids.size(1)), V = table_.size();
        Array out(ArrayShape{1, T, V});
        for (std::size_t t = 0; t < T; ++t)
            std::copy(table_[std::size_t(ids[std::int64_t(t)])].begin(), table_[std::size_t(ids[std::int64_t(t)])].end(),
                      out.data() + t * V);
        return Tensor(std::move(out));
    }
    std::int64_t block_size() const override { return block_; }

private:
    std::vector<std::vector<real>> table_;
    std::int64_t block_;
};

}  // namespace

TEST_CASE("sample_next: temperature, top-k and top-p give the distributions by hand", "[generate]") {
    const int n = 40000;
    // softmax of log p is p: p = (0.5, 0.3, 0.15, 0.05)
    const std::vector<real> z{real(std::log(0.5)), real(std::log(0.3)), real(std::log(0.15)), real(std::log(0.05))};
    require_distribution(frequencies(z, nn::GenerationOptions(), n), {0.5, 0.3, 0.15, 0.05}, n);
    // temperature 2: p^(1/2) normalised
    const double s = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
    require_distribution(frequencies(z, nn::GenerationOptions().temperature(2), n),
                         {std::sqrt(0.5) / s, std::sqrt(0.3) / s, std::sqrt(0.15) / s, std::sqrt(0.05) / s}, n);
    // top-k 2: the two likeliest, renormalised: 0.5 / 0.8, 0.3 / 0.8
    require_distribution(frequencies(z, nn::GenerationOptions().top_k(2), n), {0.625, 0.375, 0, 0}, n);
    // top-p 0.8: 0.5 (before it 0 < 0.8), 0.3 (before it 0.5 < 0.8); 0.15 has 0.8 before it: out
    require_distribution(frequencies(z, nn::GenerationOptions().top_p(0.8), n), {0.625, 0.375, 0, 0}, n);
    // top-p 0.81: the first three, 0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95
    require_distribution(frequencies(z, nn::GenerationOptions().top_p(0.81), n), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, n);
    // top-p so small that only the likeliest stays, and greedy: always id 0
    require_distribution(frequencies(z, nn::GenerationOptions().top_p(0.01), 100), {1, 0, 0, 0}, 100);
    require_distribution(frequencies(z, nn::GenerationOptions().do_sample(false), 100), {1, 0, 0, 0}, 100);
}

TEST_CASE("generate: a model of one's own, cropped to its block, stopped by a stop token", "[generate]") {
    // V 3: after 0 always 1, after 1 always 2, after 2 always 0 (logits 0 vs −100)
    const real lo = -100;
    Bigram model({{lo, 0, lo}, {lo, lo, 0}, {0, lo, lo}}, /*block=*/2);
    std::mt19937_64 rng(1);
    nn::GenerationStats stats;
    const auto ids = nn::generate(model, {0, 1, 2}, nn::GenerationOptions().max_new_tokens(5), rng, &stats);
    REQUIRE(ids == std::vector<std::int64_t>{0, 1, 2, 0, 1});  // the prompt of 3 > block 2 was cropped
    REQUIRE(stats.positions_run == 5 * 2);                       // every step ran the last 2 ids
    REQUIRE(stats.cache_bytes.empty());                          // no cache: recomputed, as asked or not
    REQUIRE_FALSE(stats.stopped);
    const auto stopped = nn::generate(model, {0}, nn::GenerationOptions().max_new_tokens(10).stop_tokens({0}), rng, &stats);
    REQUIRE(stopped == std::vector<std::int64_t>{1, 2, 0});  // the stop token ends the run, included
    REQUIRE(stats.stopped);
    REQUIRE(nn::generate(model, {2}, nn::GenerationOptions().max_new_tokens(0), rng).empty());
}

TEST_CASE("generate: the seeded generators, given or xgrad's own, repeat their draws", "[generate]") {
    Bigram model({{0, 0, 0}, {0, 0.5, 1}, {1, 0, 0}}, 4);
    const auto o = nn::GenerationOptions().max_new_tokens(30);
    std::mt19937_64 a(9), b(9), c(10);
    const auto first = nn::generate(model, {1}, o, a);
    REQUIRE(nn::generate(model, {1}, o, b) == first);
    REQUIRE(nn::generate(model, {1}, o, c) != first);
    manual_seed(5);
    const auto global = nn::generate(model, {1}, o);
    manual_seed(5);
    REQUIRE(nn::generate(model, {1}, o) == global);
}

TEST_CASE("generate: refusals name the option and its range", "[generate]") {
    Bigram model({{0, 1}, {1, 0}}, 4);
    std::mt19937_64 rng(1);
    auto refuse = [&](const nn::GenerationOptions& o, const std::string& what) {
        REQUIRE_THROWS_WITH(nn::generate(model, {0}, o, rng), Contains("generate") && Contains(what));
    };
    refuse(nn::GenerationOptions().max_new_tokens(-1), "max_new_tokens must be >= 0; got -1");
    refuse(nn::GenerationOptions().temperature(0), "temperature must be finite and > 0; got 0");
    refuse(nn::GenerationOptions().temperature(NAN), "temperature must be finite and > 0; got nan");
    refuse(nn::GenerationOptions().top_k(-2), "top_k must be >= 0 (0: all ids); got -2");
    refuse(nn::GenerationOptions().top_p(0), "top_p must be in (0, 1] (1: all ids); got 0");
    refuse(nn::GenerationOptions().top_p(1.5), "top_p must be in (0, 1] (1: all ids); got 1.5");
    refuse(nn::GenerationOptions().stop_tokens({-1}), "stop token -1 is outside [0, 2)");
    REQUIRE_THROWS_WITH(nn::generate(model, {}, nn::GenerationOptions(), rng), Contains("at least one id"));
    const std::vector<real> nan_logits{0, NAN};
    REQUIRE_THROWS_WITH(nn::sample_next(nan_logits.data(), 2, nn::GenerationOptions(), rng),
                        Contains("logit 1 of 2 is NaN"));
    // Greedy too: every logit −inf has no likeliest id (it returned id 0), +inf is an overflow.
    const std::vector<real> all_minus_inf{-INFINITY, -INFINITY}, plus_inf{0, INFINITY};
    for (bool sample : {true, false}) {
        REQUIRE_THROWS_WITH(nn::sample_next(all_minus_inf.data(), 2, nn::GenerationOptions().do_sample(sample), rng),
                            Contains("sample_next: the largest logit is -inf"));
        REQUIRE_THROWS_WITH(nn::sample_next(plus_inf.data(), 2, nn::GenerationOptions().do_sample(sample), rng),
                            Contains("sample_next: the largest logit is inf"));
    }
    std::vector<nn::KVCache> none;
    REQUIRE_THROWS_WITH(model.forward_cached(IndexTensor({{0}}), none), Contains("has no KV cache"));
}

}  // namespace test_generate
