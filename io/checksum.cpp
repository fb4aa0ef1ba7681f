// io/checksum.cpp — CRC-32 through zlib, FNV-1a written out (see checksum.hpp).
#include <xgrad/io/checksum.hpp>

#include <zlib.h>

namespace xgrad::io {

std::uint32_t crc32(std::uint32_t crc, const void* bytes, std::size_t n) {
    return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(bytes), n));  // any length
}

std::uint64_t fnv1a64(std::string_view bytes) {
    std::uint64_t h = 14695981039346656037ull;                      // the 64-bit offset basis
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;  // the 64-bit FNV prime
    return h;
}

}  // namespace xgrad::io
