// tests/nn/test_sequential.cpp — nn::Sequential: children named by position or given, and forward
// as the composition of the children's forwards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

TEST_CASE("Sequential: names by position or given - forward is the composition", "[nn][sequential]") {
    manual_seed(12);
    auto fc1 = std::make_shared<nn::Linear>(3, 4);
    auto fc2 = std::make_shared<nn::Linear>(4, 2);
    nn::Sequential net;
    net.push_back(fc1).push_back(std::make_shared<nn::Tanh>()).push_back(fc2);
    REQUIRE(net.size() == 3);
    std::vector<std::string> names;
    for (const auto& [n, _] : net.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    REQUIRE(net.num_parameters() == (3 * 4 + 4) + (4 * 2 + 2));
    Tensor x = randn({5, 3});
    REQUIRE(bits_equal(net.forward(x), fc2->forward(tanh(fc1->forward(x)))));

    nn::Sequential named;
    named.push_back("fc1", std::make_shared<nn::Linear>(3, 4))
        .push_back("act", std::make_shared<nn::GELU>())
        .push_back("fc2", std::make_shared<nn::Linear>(4, 2));
    names.clear();
    for (const auto& [n, _] : named.named_parameters()) names.push_back(n);
    REQUIRE(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    // A duplicate name throws and adds no layer.
    CHECK_THAT(message_of<ValueError>([&] { named.push_back("fc1", std::make_shared<nn::ReLU>()); }),
               Contains("'fc1' is already registered"));
    REQUIRE(named.size() == 3);
    // An empty Sequential is the identity.
    REQUIRE(nn::Sequential().forward(x).impl() == x.impl());
}
