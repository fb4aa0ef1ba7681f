// io/checksum.hpp — the two hashes xgrad's files carry: CRC-32 (zlib) and FNV-1a (64 bits).
//
//   crc32      the checksum of a safetensors file, a tokenizer file and a token shard: catches
//              any change of up to 32 adjacent bits, others but with probability 2^-32.
//   fnv1a64    a fingerprint of a text or a tokenizer recorded in a checkpoint, and the signature
//              ranks compare under MPI: h = 14695981039346656037; for each byte b:
//              h = (h xor b) · 1099511628211 (mod 2^64).
// Both detect accidents, not an adversary.
// ref: ISO 3309 / ITU-T V.42 CRC-32 as zlib computes it (zlib.crc32 in Python);
//      Fowler, Noll, Vo, IETF draft-eastlake-fnv, section 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace xgrad::io {

// CRC-32 of `n` bytes continuing from `crc` (0 to start): crc32(crc32(0, a), b) = crc32(0, ab).
std::uint32_t crc32(std::uint32_t crc, const void* bytes, std::size_t n);
inline std::uint32_t crc32(std::string_view bytes) { return crc32(0, bytes.data(), bytes.size()); }

// FNV-1a, 64 bits, of `bytes`.
std::uint64_t fnv1a64(std::string_view bytes);

}  // namespace xgrad::io
