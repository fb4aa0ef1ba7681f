// tests/examples/test_word2vec.cpp — the pieces of examples/word2vec: tokenizer, vocabulary,
// subsampling, skip-gram pairs, the negative sampler's distribution, and an end-to-end check
// that two words with the same contexts end up as each other's nearest neighbour.
//
// Legend: V vocabulary size, d vector width, B pairs per batch, k negatives per pair.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <xgrad/optim/optim.hpp>
#include "word2vec/corpus.hpp"
#include "word2vec/model.hpp"
#include "word2vec/similarity.hpp"

// Inside a namespace of this file: the tests are compiled in batches (unity builds), and a
// using-directive at file scope would reach the other files of the batch.
namespace test_word2vec {
using namespace word2vec;
using Words = std::vector<std::string>;

// ==== tokenizer ==========================================================================================

TEST_CASE("tokenize: Genesis 1:1 as `bible` prints it", "[word2vec][tokenize]") {
    REQUIRE(tokenize("Ge1:1 In the beginning God created the heaven and the earth.") ==
            Words{"in", "the", "beginning", "god", "created", "the", "heaven", "and", "the", "earth"});
}

TEST_CASE("tokenize: the reference is dropped even when the book's name is a word", "[word2vec][tokenize]") {
    // Job1:1 — "job" must not come from the reference, but must come from the text.
    REQUIRE(tokenize("Job1:1 There was a man in the land of Uz, whose name was Job; and that man was perfect") ==
            Words{"there", "was", "a", "man", "in", "the", "land", "of", "uz", "whose", "name", "was", "job", "and",
                  "that", "man", "was", "perfect"});
    // A numbered book, and punctuation inside the verse.
    REQUIRE(tokenize("1Cor13:4 Charity suffereth long, and is kind; charity envieth not;") ==
            Words{"charity", "suffereth", "long", "and", "is", "kind", "charity", "envieth", "not"});
}

TEST_CASE("tokenize: apostrophes and digits split words - plain text keeps its first word", "[word2vec][tokenize]") {
    REQUIRE(tokenize("Ge24:67 his mother Sarah's tent") == Words{"his", "mother", "sarah", "s", "tent"});
    REQUIRE(tokenize("Psa23:1 The LORD is my shepherd") == Words{"the", "lord", "is", "my", "shepherd"});
    REQUIRE(tokenize("Chapter 12: the end") == Words{"chapter", "the", "end"});  // not a reference
    REQUIRE(tokenize("Ge1:1") == Words{});
    REQUIRE(tokenize("") == Words{});
}

TEST_CASE("read_corpus reads a plain-text file line by line", "[word2vec][tokenize]") {
    const std::string path = "test_word2vec_corpus.txt";
    {
        std::ofstream f(path);
        f << "Ge1:1 In the beginning\nGe1:2 And the earth\n";
    }
    REQUIRE(read_corpus(path) == Words{"in", "the", "beginning", "and", "the", "earth"});
    std::remove(path.c_str());
    REQUIRE_THROWS_AS(read_corpus("no/such/file.txt"), std::runtime_error);
}

// ==== vocabulary, subsampling, pairs ======================================================================

TEST_CASE("build_vocab: min_count - most frequent first - ties alphabetical", "[word2vec][vocab]") {
    const Words tokens{"b", "a", "c", "a", "b", "a", "d", "c"};  // a 3, b 2, c 2, d 1
    const Vocab v = build_vocab(tokens, 2);
    REQUIRE(v.words == Words{"a", "b", "c"});
    REQUIRE(v.counts == std::vector<std::int64_t>{3, 2, 2});
    REQUIRE(v.id("d") == -1);
    REQUIRE(encode(tokens, v) == std::vector<std::int32_t>{1, 0, 2, 0, 1, 0, 2});
}

TEST_CASE("keep_probabilities: word2vec.c's formula (sqrt(f/t) + 1) t/f - capped at 1", "[word2vec][subsample]") {
    Vocab v;
    v.words = {"the", "rare"};
    v.counts = {9999, 1};  // f = 0.9999 and 1e-4
    const double t = 1e-3;
    const auto keep = keep_probabilities(v, t);
    const double f = 0.9999;
    REQUIRE(keep[0] == Approx((std::sqrt(f / t) + 1) * t / f));  // ≈ 0.0326
    REQUIRE(keep[1] == 1.0);
    REQUIRE(keep_probabilities(v, 0)[0] == 1.0);  // t = 0: no subsampling
}

TEST_CASE("skipgram_pairs: window 1 pairs each word with its two neighbours", "[word2vec][pairs]") {
    std::mt19937_64 rng(0);
    const auto pairs = skipgram_pairs({10, 11, 12}, /*window=*/1, rng);  // b is always 1
    std::vector<std::pair<int, int>> got;
    for (const auto& p : pairs) got.emplace_back(p.centre, p.context);
    REQUIRE(got == std::vector<std::pair<int, int>>{{10, 11}, {11, 10}, {11, 12}, {12, 11}});
}

// ==== negative sampler ========================================================================================

TEST_CASE("NegativeSampler draws from counts^0.75 / Z", "[word2vec][sampler]") {
    const std::vector<std::int64_t> counts{5000, 1200, 600, 90, 40, 7, 1};
    const NegativeSampler sampler(counts);
    double z = 0;
    for (auto c : counts) z += std::pow(double(c), 0.75);
    for (std::size_t w = 0; w < counts.size(); ++w)
        REQUIRE(sampler.probability(std::int32_t(w)) == Approx(std::pow(double(counts[w]), 0.75) / z).epsilon(1e-12));

    // 200,000 draws: each word's frequency within 3 standard errors √(p(1−p)/n) of P_n(w).
    const int n = 200000;
    std::vector<int> hits(counts.size(), 0);
    std::mt19937_64 rng(7);
    for (int i = 0; i < n; ++i) ++hits[std::size_t(sampler.draw(rng))];
    for (std::size_t w = 0; w < counts.size(); ++w) {
        const double p = sampler.probability(std::int32_t(w)), p_hat = double(hits[w]) / n;
        const double se = std::sqrt(p * (1 - p) / n);
        INFO("word " << w << " count " << counts[w] << ": P_n " << p << ", drawn " << p_hat << ", se " << se);
        REQUIRE(std::abs(p_hat - p) <= 3 * se);
    }
    // The 3/4 power flattens: the rarest word is drawn far more often than its raw frequency.
    REQUIRE(sampler.probability(6) > 3 * 1.0 / 6938);
}

TEST_CASE("NegativeSampler is deterministic for a seed", "[word2vec][sampler]") {
    const NegativeSampler sampler({3, 2, 1});
    std::mt19937_64 a(42), b(42);
    for (int i = 0; i < 100; ++i) REQUIRE(sampler.draw(a) == sampler.draw(b));
}

// ==== end to end: shared contexts make similar vectors ==========================================================

// A synthetic corpus of 5-word sentences "x x W x x" (window 2, so the middle word W sees only
// its own sentence). "cat" and "dog" only ever appear among the farm words f0..f3; "cow" half
// the time among farm words, half among town words t0..t3; "car" only among town words. The
// farm and town words also appear as centres of each other. After training, cat's nearest
// word must be dog and dog's must be cat: they share every context, while cow shares half.
TEST_CASE("skip-gram: two words with identical contexts become each other's nearest neighbour", "[word2vec][train]") {
    std::mt19937_64 rng(3);
    const Words farm{"f0", "f1", "f2", "f3"}, town{"t0", "t1", "t2", "t3"};
    auto pick = [&rng](const Words& g) { return g[rng() % g.size()]; };
    Words tokens;
    for (int s = 0; s < 3000; ++s) {
        const int kind = int(rng() % 6);
        const std::string middle = kind < 2 ? (kind == 0 ? "cat" : "dog") : kind < 4 ? "cow" : kind == 4 ? "car" : pick(farm);
        const Words& around = (middle == "cat" || middle == "dog" || (middle == "cow" && rng() % 2 == 0) ||
                               middle[0] == 'f') ? farm : town;
        for (const auto& w : {pick(around), pick(around), middle, pick(around), pick(around)}) tokens.push_back(w);
    }
    const Vocab vocab = build_vocab(tokens, 1);
    const auto ids = encode(tokens, vocab);
    const std::vector<double> keep(std::size_t(vocab.size()), 1.0);  // no subsampling
    const NegativeSampler sampler(vocab.counts);

    SkipGram model(vocab.size(), /*dim=*/16, /*sparse=*/true, rng);
    optim::Adam opt(model.named_parameters(), optim::AdamOptions(1e-2));
    const std::size_t B = 64;
    for (int epoch = 0; epoch < 4; ++epoch) {
        const auto pairs = epoch_pairs(ids, keep, /*window=*/2, rng);
        for (std::size_t begin = 0; begin + B <= pairs.size(); begin += B) {
            const Batch batch = make_batch(pairs, begin, begin + B, /*negatives=*/5, sampler, rng);
            Tensor loss = nn::functional::binary_cross_entropy_with_logits(
                model.forward(batch.centres, batch.contexts), batch.targets, nn::Reduction::Mean);
            opt.zero_grad();
            loss.backward();
            opt.step();
        }
    }
    const Array unit = unit_rows(model.in_embed->weight.data());
    const auto cat = vocab.id("cat"), dog = vocab.id("dog"), cow = vocab.id("cow"), car = vocab.id("car");
    INFO("cos(cat, dog) " << cosine(unit, cat, dog) << "  cos(cat, cow) " << cosine(unit, cat, cow)
                          << "  cos(cat, car) " << cosine(unit, cat, car));
    REQUIRE(nearest(unit, cat, 1)[0].first == dog);
    REQUIRE(nearest(unit, dog, 1)[0].first == cat);
    REQUIRE(cosine(unit, cat, dog) > cosine(unit, cat, cow));
    REQUIRE(cosine(unit, cat, cow) > cosine(unit, cat, car));
}

TEST_CASE("spearman: rank correlation with ties", "[word2vec][spearman]") {
    // Any increasing function keeps the order: ρ = 1; reversing it gives ρ = −1.
    CHECK(spearman({1, 2, 3, 4}, {1, 8, 27, 64}) == Approx(1.0));
    CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
    // By hand: ranks of a are 1..5; b = (5, 6, 7, 8, 7) has ranks (1, 2, 3.5, 5, 3.5) (the two
    // 7s share ranks 3 and 4). Centred at 3: Σ ra·rb = 8, Σ ra² = 10, Σ rb² = 9.5, so
    // ρ = 8 / √95 = 0.8207827 (scipy.stats.spearmanr gives 0.8207826816681233).
    CHECK(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}) == Approx(0.8207826816681233).epsilon(1e-12));
    CHECK_THROWS_AS(spearman({1, 2}, {1, 2, 3}), std::invalid_argument);
}

}  // namespace test_word2vec
