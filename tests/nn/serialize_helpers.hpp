// tests/nn/serialize_helpers.hpp — what the safetensors tests (test_serialize.cpp and
// test_serialize_checksum.cpp) build files from.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <xgrad/nn/nn.hpp>

namespace xgrad::testing {

// A safetensors file from its parts: the 8-byte little-endian length (the header's padded size
// unless `declared` overrides it), the header padded with spaces to a multiple of 8, the data.
inline std::string st_file(std::string header, const std::string& data, std::optional<std::uint64_t> declared = {}) {
    header.append((8 - header.size() % 8) % 8, ' ');
    const std::uint64_t n = declared.value_or(header.size());
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);  // x86-64 and arm64 are little-endian
    return out + header + data;
}

// Files made by hand carry no xgrad checksum: they load with the opt-in, as another tool's would.
inline const nn::LoadOptions kUnchecked = nn::LoadOptions().require_checksum(false);

// One (2,) parameter "w" = [1, 2].
struct Pair : nn::Module {
    Tensor w;
    Pair() { w = register_parameter("w", Tensor({1, 2})); }
};

}  // namespace xgrad::testing
