// tests/data/test_vocab.cpp — data/vocab: CharVocab's ids round-trip, and a default-constructed
// vocabulary is empty (every byte refused) rather than holding whatever the stack held.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <xgrad/core/error.hpp>
#include <xgrad/data/vocab.hpp>
#include "test_helpers.hpp"

namespace test_data_vocab {
using namespace xgrad::testing;
using xgrad::data::CharVocab;

TEST_CASE("CharVocab: encode and decode round-trip, the refusals name the byte or the id", "[data][vocab]") {
    const CharVocab v = CharVocab::from_text("hello");
    REQUIRE(v.chars == "ehlo");
    REQUIRE(v.encode("hello") == std::vector<std::int64_t>{1, 0, 2, 2, 3});
    REQUIRE(v.decode({3, 2, 0}) == "ole");
    CHECK(message_of<std::runtime_error>([&] { v.encode("hex"); }) ==
          "encode: character \"x\" (byte 120) at position 2 is not in the vocabulary of 4 characters");
    CHECK(message_of<xgrad::IndexError>([&] { v.decode({0, -1}); }) == "decode: id -1 at position 1 out of range [0, 4)");
}

TEST_CASE("CharVocab: a default-constructed vocabulary holds no byte", "[data][vocab]") {
    // Its byte → id table was left uninitialised: encode returned whatever the memory held as ids.
    std::vector<unsigned char> junk(sizeof(CharVocab), 0x11);  // a stack or heap full of non-negative int16
    auto* v = new (junk.data()) CharVocab;
    for (int c = 0; c < 256; ++c) CHECK(!v->contains(char(c)));
    CHECK(v->size() == 0);
    CHECK(message_of<std::runtime_error>([&] { v->encode("a"); }) ==
          "encode: character \"a\" (byte 97) at position 0 is not in the vocabulary of 0 characters");
    v->~CharVocab();
}

}  // namespace test_data_vocab
