// tests/nn/test_dropout.cpp — nn/dropout (float32): the kept fraction within 3 sigma of 1 - p, the
// exact scale 1/(1 - p), the backward reusing the mask, reproducibility under manual_seed,
// train()/eval(), p = 0 and p = 1, and a bad p. Gradcheck: gradcheck_dropout.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

// ==== dropout ========================================================================================

TEST_CASE("dropout: kept fraction within 3 sigma of 1 - p and the scale is exact", "[nn][dropout]") {
    manual_seed(7);
    const std::size_t n = 1000000;
    for (double p : {0.1, 0.5, 0.9}) {
        Tensor y = F::dropout(ones({n}), p);
        const real scale = real(1 / (1 - p));
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const real v = y.data()[i];
            REQUIRE((v == 0 || v == scale));  // kept entries are exactly 1/(1 - p)
            kept += v != 0;
        }
        const double sigma = std::sqrt(n * p * (1 - p));  // binomial(n, 1 - p)
        INFO("p = " << p << ": kept " << kept << " of " << n);
        REQUIRE(std::fabs(double(kept) - n * (1 - p)) < 3 * sigma);
    }
}

TEST_CASE("dropout: the backward multiplies by the same mask", "[nn][dropout]") {
    manual_seed(8);
    const real scale = real(1 / (1 - 0.3));
    Tensor x = from_array(Array(rand({5, 40}).data() + 0.5), true);  // never 0, so y ≠ 0 ⇔ kept
    Tensor y = F::dropout(x, 0.3);
    Tensor g = randn({5, 40});
    y.backward(g);
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        const bool k = y.data()[i] != 0;
        kept += k;
        REQUIRE(y.data()[i] == (k ? x.data()[i] * scale : 0));
        REQUIRE(x.grad().data()[i] == (k ? g.data()[i] * scale : 0));
    }
    REQUIRE(kept > 0);
    REQUIRE(kept < x.numel());
}

TEST_CASE("dropout: manual_seed reproduces the mask", "[nn][dropout]") {
    Tensor x = ones({1001});
    manual_seed(42);
    Tensor a = F::dropout(x, 0.5);
    Tensor b = F::dropout(x, 0.5);
    manual_seed(42);
    Tensor c = F::dropout(x, 0.5);
    REQUIRE(bits_equal(a, c));
    REQUIRE(!bits_equal(a, b));  // the generator moved on
}

TEST_CASE("dropout: eval and p = 0 are the identity - p = 1 gives zeros", "[nn][dropout]") {
    Tensor x = randn({3, 4}, true);
    REQUIRE(F::dropout(x, 0.5, /*training=*/false).impl() == x.impl());
    REQUIRE(F::dropout(x, 0.0).impl() == x.impl());

    Tensor y = F::dropout(x, 1.0);
    require_values(y, zeros({3, 4}), 0);
    y.backward(ones({3, 4}));
    require_values(x.grad(), zeros({3, 4}), 0);

    // The module follows train()/eval(), also as a submodule.
    struct Net : nn::Module {
        std::shared_ptr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    } net;
    REQUIRE(net.drop->p() == 0.5);
    REQUIRE(net.num_parameters() == 0);
    Tensor big = ones({1000});
    REQUIRE(!bits_equal(net.drop->forward(big), big));  // training by default
    net.eval();
    REQUIRE(net.drop->forward(big).impl() == big.impl());
    net.train();
    REQUIRE(!bits_equal(net.drop->forward(big), big));
}

TEST_CASE("hostile: dropout with p outside 0 to 1 or NaN", "[nn][dropout][hostile]") {
    Tensor x = ones({4});
    for (double p : {-0.1, 1.5, std::nan(""), double(kInf)}) {
        INFO("p = " << p);
        CHECK_THAT(message_of<ValueError>([&] { F::dropout(x, p); }), Contains("dropout") && Contains("[0, 1]"));
        CHECK_THAT(message_of<ValueError>([&] { F::dropout(x, p, /*training=*/false); }), Contains("[0, 1]"));
        CHECK_THAT(message_of<ValueError>([&] { nn::Dropout d(p); }), Contains("Dropout"));
    }
    CHECK_THAT(message_of<ValueError>([] { F::dropout(Tensor()); }), Contains("undefined"));
    REQUIRE(F::dropout(zeros({0, 3}), 0.5).shape() == Shape{0, 3});
}
