// tests/core/test_parse.cpp — core/parse.hpp: the strict number parsers a checkpoint's metadata
// goes through (one decimal spelling only; anything else names the key and the text).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include <xgrad/core/parse.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// =============================================================================================
// bug 9: strict numbers
// =============================================================================================

TEST_CASE("ckpt bug 9: parse_int64 and parse_double accept one spelling only", "[ckpt][parse][regression]") {
    REQUIRE(try_parse_int64("12") == 12);
    REQUIRE(try_parse_int64("-3") == -3);
    REQUIRE(try_parse_int64("9223372036854775807") == INT64_MAX);
    for (const char* bad : {"", "+1", " 1", "1 ", "5abc", "1e3", "0x10", "1.0", "9223372036854775808", "--1"}) {
        INFO("'" << bad << "'");
        REQUIRE_FALSE(try_parse_int64(bad).has_value());
    }
    REQUIRE(try_parse_double("0.001") == 0.001);
    REQUIRE(try_parse_double("1e-08") == 1e-08);
    REQUIRE(try_parse_double("-2.5") == -2.5);
    REQUIRE(std::isinf(*try_parse_double("inf")));
    for (const char* bad : {"", "+1", " 0.5", "0.5 ", "0x10", "1e400", "1,5", "0.5abc"}) {
        INFO("'" << bad << "'");
        REQUIRE_FALSE(try_parse_double(bad).has_value());
    }
    CHECK_THAT(message_of<ValueError>([] { parse_int64("5abc", "op", "train.step"); }),
               Contains("op: 'train.step' = '5abc' is not a decimal integer"));
    CHECK_THAT(message_of<ValueError>([] { parse_int64("7", "op", "k", 0, 5); }),
               Contains("'k' = '7' is outside [0, 5]"));
    CHECK_THAT(message_of<ValueError>([] { parse_double(std::string("1\0x", 3), "op", "lr"); }),
               Contains("'lr' = '1\\x00x' is not a decimal number"));
}
