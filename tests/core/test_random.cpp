// tests/core/test_random.cpp — multinomial of core/random.cpp: frequencies over 200,000 draws
// against the probabilities (with replacement) and against the exact probabilities of the first two
// draws without replacement, P(first = i, second = j) = p_i · p_j / (1 − p_i); each count within
// 5 binomial standard deviations, √(n·p·(1 − p)), of n·p. Seeded, so deterministic. Also: the same
// seed gives the same draws, a weight of 0 is never drawn, and every error by its message.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <xgrad/core/ops.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;

// |count − n·p| <= 5σ with σ = √(n·p·(1 − p)), the binomial standard deviation of the count.
static void require_frequency(std::int64_t count, std::int64_t n, double p) {
    const double sigma = std::sqrt(n * p * (1 - p));
    INFO("count " << count << " of " << n << ", expected " << n * p << " ± 5 × " << sigma);
    REQUIRE(std::abs(count - n * p) <= 5 * sigma);
}

TEST_CASE("multinomial - with replacement, frequencies match the weights", "[random]") {
    std::mt19937_64 gen(2024);
    const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};   // from the weights 1, 2, 3, 4 (sum 10)
    const std::int64_t n = 200000;
    IndexTensor draws = multinomial(Tensor({1, 2, 3, 4}), n, /*replacement=*/true, gen);
    REQUIRE(draws.shape() == Shape{n});
    std::vector<std::int64_t> count(4, 0);
    for (std::int64_t i = 0; i < n; ++i) ++count.at(static_cast<std::size_t>(draws[i]));
    for (std::size_t c = 0; c < 4; ++c) require_frequency(count[c], n, p[c]);
}

TEST_CASE("multinomial - without replacement, the first two draws match p_i p_j / (1 - p_i)", "[random]") {
    std::mt19937_64 gen(7);
    const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
    const std::int64_t n = 200000;  // n rows of the same weights, two draws from each
    Array rows(ArrayShape{static_cast<std::size_t>(n), 4});
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r)
        for (std::size_t c = 0; c < 4; ++c) rows(r, c) = static_cast<real>(c + 1);
    IndexTensor draws = multinomial(from_array(std::move(rows)), 2, /*replacement=*/false, gen);
    REQUIRE(draws.shape() == Shape{n, 2});
    std::vector<std::vector<std::int64_t>> count(4, std::vector<std::int64_t>(4, 0));
    for (std::int64_t r = 0; r < n; ++r) ++count.at(static_cast<std::size_t>(draws[2 * r])).at(static_cast<std::size_t>(draws[2 * r + 1]));
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 4; ++j) {
            INFO("first " << i << ", second " << j);
            if (i == j) REQUIRE(count[i][j] == 0);  // never the same category twice
            else require_frequency(count[i][j], n, p[i] * p[j] / (1 - p[i]));
        }
}

TEST_CASE("multinomial - a weight of 0 is never drawn, and all C without replacement is a permutation", "[random]") {
    manual_seed(11);
    IndexTensor d = multinomial(Tensor({{0, 1, 0, 3}, {2, 0, 0, 0}}), 1000, /*replacement=*/true);
    REQUIRE(d.shape() == Shape{2, 1000});
    for (std::int64_t i = 0; i < 1000; ++i) {
        REQUIRE((d[i] == 1 || d[i] == 3));
        REQUIRE(d[1000 + i] == 0);
    }
    IndexTensor perm = multinomial(Tensor({5, 1, 2, 0.5, 9}), 5);  // replacement=false by default
    const std::set<std::int64_t> seen(perm.data().begin(), perm.data().end());
    REQUIRE(seen == std::set<std::int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("multinomial - the same seed gives the same draws", "[random]") {
    Tensor probs({{0.2, 0.3, 0.5}, {1, 1, 1}});
    manual_seed(99);
    IndexTensor a = multinomial(probs, 3);
    IndexTensor a_rep = multinomial(probs, 50, true);
    manual_seed(99);
    REQUIRE(equal(multinomial(probs, 3), a));
    REQUIRE(equal(multinomial(probs, 50, true), a_rep));
    std::mt19937_64 g1(5), g2(5), g3(6);
    IndexTensor b = multinomial(probs, 50, true, g1);
    REQUIRE(equal(multinomial(probs, 50, true, g2), b));
    REQUIRE_FALSE(equal(multinomial(probs, 50, true, g3), b));  // 50 draws of 3: a collision is ~1e-24
}

TEST_CASE("multinomial - errors as PyTorch's, naming the op", "[random]") {
    Tensor p({1, 2, 3});
    REQUIRE_THROWS_WITH(multinomial(Tensor({1, -1}), 1), Contains("multinomial: probability tensor contains either inf, nan or element < 0: -1 at row 0, category 1"));
    REQUIRE_THROWS_WITH(multinomial(Tensor({{1, 1}, {kNaN, 1}}), 1), Contains("multinomial: probability tensor contains either inf, nan or element < 0: nan at row 1, category 0"));
    REQUIRE_THROWS_WITH(multinomial(Tensor({kInf, 1}), 1), Contains("element < 0: inf at row 0"));
    REQUIRE_THROWS_WITH(multinomial(Tensor({{1, 1}, {0, 0}}), 1), Contains("multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row 1"));
    REQUIRE_THROWS_WITH(multinomial(p, 0), Contains("multinomial: cannot sample n_sample <= 0 samples; got 0"));
    REQUIRE_THROWS_WITH(multinomial(p, -2, true), Contains("cannot sample n_sample <= 0 samples; got -2"));
    REQUIRE_THROWS_WITH(multinomial(p, 4), Contains("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement: 4 > 3"));
    REQUIRE_THROWS_WITH(multinomial(Tensor({0, 1, 0}), 2), Contains("multinomial: invalid multinomial distribution (with replacement=false, not enough categories of non-zero weight to sample): row 0 has 1, num_samples is 2"));
    REQUIRE(multinomial(Tensor({0, 1, 0}), 2, true).shape() == Shape{2});  // with replacement: fine
    REQUIRE_THROWS_WITH(multinomial(ones({2, 2, 2}), 1), Contains("multinomial: prob_dist must be 1 or 2 dim; got shape (2, 2, 2)"));
    REQUIRE_THROWS_WITH(multinomial(Tensor(1.0), 1), Contains("prob_dist must be 1 or 2 dim"));
    REQUIRE_THROWS_WITH(multinomial(zeros({2, 0}), 1, true), Contains("multinomial: needs at least one category; got shape (2, 0)"));
}

TEST_CASE("multinomial - a result too large to hold is refused, not allocated or wrapped", "[random]") {
    // 4 rows × 2^62 samples = 2^64 wraps to 0 in size_t: an empty buffer then written past its end.
    const std::int64_t huge = std::int64_t(1) << 62;
    REQUIRE_THROWS_WITH(multinomial(ones({4, 2}), huge, true),
                        Contains("multinomial: 4 rows × num_samples 4611686018427387904 exceeds") && Contains("2^60"));
    REQUIRE_THROWS_WITH(multinomial(ones({2}), INT64_MAX, true), Contains("num_samples 9223372036854775807 exceeds"));
}
