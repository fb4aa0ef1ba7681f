// tests/reference/reference_json.hpp — the PyTorch values kept as JSON in tests/reference/ (written
// by its make_*_reference.py scripts, never run by the tests), for the value tests that compare
// against them: attention, init and positional; and minbpe's tokens for text/ (bpe_reference.json).
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace xgrad::testing {

// tests/reference/FILE parsed, once per process (later calls return the same object). Fails the
// calling test when the file cannot be opened; nlohmann::json::parse_error when it is not JSON.
inline const nlohmann::json& reference_json(const std::string& file) {
    static std::map<std::string, nlohmann::json> parsed;
    auto it = parsed.find(file);
    if (it == parsed.end()) {
        std::ifstream in(std::string(XGRAD_REFERENCE_DIR) + "/" + file);
        REQUIRE(in.good());
        it = parsed.emplace(file, nlohmann::json::parse(in)).first;
    }
    return it->second;
}

}  // namespace xgrad::testing
