// tests/nn/test_module_list.cpp — nn::ModuleList: children named by position, indexing, iteration
// in registration order.
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

// ---- ModuleList ----------------------------------------------------------------------------------

TEST_CASE("ModuleList: children named by position - indexing - iteration in order", "[nn][module_list]") {
    nn::ModuleList<nn::LayerNorm> list;
    for (std::int64_t d : {2, 3, 4}) list.push_back(std::make_shared<nn::LayerNorm>(d));
    REQUIRE(list.size() == 3);
    const NamedTensors params = list.named_parameters();
    REQUIRE(params.size() == 6);
    REQUIRE(params[0].first == "0.weight");
    REQUIRE(params[3].first == "1.bias");
    REQUIRE(params[5].first == "2.bias");
    REQUIRE(list[1]->weight.shape() == Shape{3});
    std::vector<std::size_t> widths;
    for (const auto& ln : list) widths.push_back(ln->weight.numel());
    REQUIRE(widths == std::vector<std::size_t>{2, 3, 4});
    CHECK_THAT(message_of<ValueError>([&] { (void)list[3]; }), Contains("ModuleList") && Contains("[0, 3)"));
}
