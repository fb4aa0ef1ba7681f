// nn/serialize.cpp — safetensors writer and validating reader (layout in nn/serialize.hpp).
#include <xgrad/nn/serialize.hpp>


#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <tuple>

#include <nlohmann/json.hpp>

#include <xgrad/io/atomic_file.hpp>
#include <xgrad/io/checksum.hpp>

namespace xgrad::nn {

namespace {

// safetensors is little-endian; memory is copied as is, so only little-endian hosts are supported.
bool host_is_little_endian() {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

#ifdef XGRAD_DOUBLE
constexpr const char* kDtype = "F64";
#else
constexpr const char* kDtype = "F32";
#endif

constexpr std::uint64_t kMaxHeader = 100'000'000;  // readers refuse headers over 100 MB

// ---- the checksum (its definition: nn/serialize.hpp) ------------------------------------------
// The header begins with kStampPrefix; the 8 hex digits follow at file bytes [40, 48), then '"'.
constexpr const char* kChecksumKey = "xgrad.crc32";
const std::string kStampPrefix = R"({"__metadata__":{"xgrad.crc32":")";
const std::size_t kDigitsAt = 8 + kStampPrefix.size();  // 40: the length, then the prefix

// The CRC written as "%08x", or nullopt if `text` is not exactly 8 lowercase hex digits.
std::optional<std::uint32_t> parse_crc(std::string_view text) {
    std::uint32_t v = 0;
    if (text.size() != 8) return std::nullopt;
    for (char c : text) {
        if (c >= '0' && c <= '9') v = v * 16 + static_cast<std::uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f') v = v * 16 + static_cast<std::uint32_t>(c - 'a' + 10);
        else return std::nullopt;
    }
    return v;
}

// Bits in which the header's first bytes differ from kStampPrefix: 0 for xgrad's files, a few for
// a damaged stamp, hundreds for another tool's header.
std::size_t stamp_distance(const std::string& bytes) {
    std::size_t bits = 0;
    for (std::size_t i = 0; i < kStampPrefix.size(); ++i) {
        const unsigned char b = i + 8 < bytes.size() ? static_cast<unsigned char>(bytes[i + 8]) : 0;
        bits += static_cast<std::size_t>(__builtin_popcount(b ^ static_cast<unsigned char>(kStampPrefix[i])));
    }
    return bits;
}

// Checks the checksum of a whole file's `bytes` (at least 8), before any parsing: a damaged file
// is reported as damaged, not as whatever its damage makes it look like. Returns whether the file
// had one. A stamp within 8 bits of xgrad's is a damaged stamp, refused even when the caller
// opted out: the opt-out is for other tools' files, not for xgrad's with a damaged checksum.
bool verify_checksum(const std::string& bytes, const std::string& path, const LoadOptions& options) {
    const char* op = "load_safetensors";
    if (bytes.compare(8, kStampPrefix.size(), kStampPrefix) != 0) {
        check(stamp_distance(bytes) > 8, op,
              "'{}' is corrupted: its header begins like xgrad's checksum stamp {} with a few bits changed",
              path, kStampPrefix);
        check(!options.require_checksum(), op,
              "'{}' has no xgrad checksum (its header does not begin with {}<8 hex digits>\"), so its bytes "
              "cannot be verified: a file written by another tool, such as Python's safetensors, or one whose "
              "header is damaged. To load a file from another tool, pass "
              "nn::LoadOptions().require_checksum(false) to nn::load_safetensors",
              path, kStampPrefix);
        return false;
    }
    const std::optional<std::uint32_t> recorded =
        bytes.size() > kDigitsAt + 8 && bytes[kDigitsAt + 8] == '"'
            ? parse_crc(std::string_view(bytes).substr(kDigitsAt, 8)) : std::nullopt;
    check(recorded.has_value(), op, "'{}': the checksum '{}' is not a CRC-32 (8 lowercase hex digits and a '\"')",
          path, kChecksumKey);
    std::uint32_t actual = io::crc32(0, bytes.data(), kDigitsAt);
    actual = io::crc32(actual, bytes.data() + kDigitsAt + 8, bytes.size() - kDigitsAt - 8);
    check(actual == *recorded, op,
          "'{}' is corrupted or truncated: the CRC-32 of its {} bytes (all but the checksum's 8 digits) is "
          "{:08x}, but its header records {:08x}", path, bytes.size(), actual, *recorded);
    return true;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
    std::vector<ArrayRef> arrays;  // each tensor's own array: nothing is copied
    for (const auto& [name, t] : tensors) {
        check(t.defined(), "save_safetensors", "tensor '{}' is undefined", name);
        arrays.push_back({name, &t.data()});
    }
    save_safetensors_arrays(path, arrays, metadata);
}

void save_safetensors_arrays(const std::string& path, const std::vector<ArrayRef>& arrays, const Metadata& metadata) {
    check(host_is_little_endian(), "save_safetensors", "big-endian hosts are not supported");
    check(metadata.count(kChecksumKey) == 0, "save_safetensors",
          "the metadata key '{}' is reserved: xgrad writes the file's checksum there", kChecksumKey);
    nlohmann::json entries = nlohmann::json::object();
    std::set<std::string> names;
    std::size_t offset = 0;
    for (const auto& [name, a] : arrays) {
        check(!name.empty() && name != "__metadata__", "save_safetensors", "invalid tensor name '{}'", name);
        check(names.insert(name).second, "save_safetensors", "duplicate tensor name '{}'", name);
        check(a != nullptr, "save_safetensors", "array '{}' is null", name);
        const std::size_t bytes = a->size() * sizeof(real);
        entries[name] = {{"dtype", kDtype}, {"shape", to_shape(a->shape())},
                         {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    // The header: kStampPrefix, the 8 digits, then `tail` = '"', the caller's metadata, the entries.
    std::string meta_text, entries_text;
    try {  // dump() throws on a name or metadata string that is not valid UTF-8
        meta_text = nlohmann::json(metadata).dump();
        entries_text = entries.dump();
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("save_safetensors: a tensor name or metadata string is not valid UTF-8 ({})",
                                     e.what()));
    }
    std::string tail = "\"";  // {"a":"b",...} → ,"a":"b",...}  and  {} → }
    tail += meta_text.size() > 2 ? "," + meta_text.substr(1) : "}";
    tail += entries_text.size() > 2 ? "," + entries_text.substr(1) : "}";
    tail.append((8 - (kStampPrefix.size() + 8 + tail.size()) % 8) % 8, ' ');  // data 8-byte aligned
    const std::uint64_t n = kStampPrefix.size() + 8 + tail.size();
    check(n <= kMaxHeader, "save_safetensors",
          "the header of '{}' would be {} bytes, over the {} bytes load_safetensors reads (its names and "
          "metadata are too long); nothing was written", path, n, kMaxHeader);
    // The checksum of every byte but its own digits, in file order.
    std::uint32_t crc = io::crc32(0, &n, 8);
    crc = io::crc32(io::crc32(crc, kStampPrefix.data(), kStampPrefix.size()), tail.data(), tail.size());
    for (const auto& [_, a] : arrays)
        if (a->size() > 0) crc = io::crc32(crc, a->data(), a->size() * sizeof(real));
    const std::string text = kStampPrefix + fmt::format("{:08x}", crc) + tail;

    // Streamed to the file tensor by tensor, never assembled in memory (io/atomic_file.hpp).
    io::AtomicFile file(path, "save_safetensors");
    file.write(&n, 8);
    file.write(text);
    for (const auto& [_, a] : arrays)
        if (a->size() > 0) file.write(a->data(), a->size() * sizeof(real));  // an empty array's data() may be null
    file.commit();
}

namespace {

// ---- load: read, parse the header, read the tensors, check the tiling ----------------------------
// The whole file: only a regular file (a directory reads as 0 bytes, /dev/zero until memory runs out).
std::string read_checkpoint_bytes(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
        throw std::runtime_error("load_safetensors: '" + path + "' is not a regular file (a directory, device or pipe?)");
    errno = 0;
    std::ifstream in(path, std::ios::binary | std::ios::ate);  // opened at the end: tellg() is the size
    if (!in)
        throw std::runtime_error("load_safetensors: cannot open '" + path + "'" +
                                 (errno ? std::string(" (") + std::strerror(errno) + ")" : std::string()));
    std::string bytes(static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
    if (!in.seekg(0) || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        throw std::runtime_error("load_safetensors: cannot read '" + path + "' (changed while reading?)");
    return bytes;
}

// The header, bytes [8, 8+n): one JSON object, '{' first, spaces only after its '}' (a parser would
// stop quietly at a NUL), without duplicate keys (a JSON parser keeps the last: the callback refuses them).
nlohmann::json parse_safetensors_header(std::string_view text, const std::string& path) {
    const char* op = "load_safetensors";
    std::vector<std::set<std::string>> keys;  // one set per open object
    auto no_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start) keys.emplace_back();
        if (event == E::object_end) keys.pop_back();
        if (event == E::key && !keys.back().insert(parsed.get<std::string>()).second)
            throw ValueError(fmt::format("{}: '{}' has a header with the duplicate key '{}'", op, path,
                                         parsed.get<std::string>()));
        return true;
    };
    const std::size_t nul = text.find('\0');
    check(nul == std::string_view::npos, op, "'{}' has a NUL byte in its header, at byte {} of {}", path,
          8 + nul, 8 + text.size());
    const std::size_t json_end = text.find_last_not_of(' ') + 1;  // 0 if all spaces
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(json_end),
                                       no_duplicates);
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("{}: '{}' has a header that is not valid JSON ({})", op, path, e.what()));
    }
    check(header.is_object(), op, "'{}' header is not a JSON object", path);
    check(text.front() == '{' && text[json_end - 1] == '}', op,
          "'{}' has a header with bytes other than spaces before or after its JSON object (it must start "
          "with '{{' and end with '}}' followed only by spaces)", path);
    return header;
}

// Where a tensor's bytes are in the data section.
struct TensorSpan {
    std::size_t begin, end;  // byte offsets in the data section
    std::string name;
};

// One header entry {"dtype", "shape", "data_offsets"} checked and its bytes read from `data` (the
// data section, data_size bytes), converted from F32 or F64 to real.
Array read_safetensors_entry(const std::string& name, const nlohmann::json& e, const char* data,
                             std::size_t data_size, const std::string& path, TensorSpan& span) {
    const char* op = "load_safetensors";
    check(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets") &&
              e["dtype"].is_string() && e["shape"].is_array() && e["data_offsets"].is_array() &&
              e["data_offsets"].size() == 2,
          op, "'{}': entry '{}' lacks dtype, shape or data_offsets", path, name);
    const std::string dtype = e["dtype"].get<std::string>();
    check(dtype == "F32" || dtype == "F64", op, "'{}': tensor '{}' has dtype {}; xgrad reads F32 and F64",
          path, name, dtype);
    const std::size_t elem = dtype == "F32" ? 4 : 8;
    ArrayShape shape;
    std::size_t numel = 1;
    for (const auto& s : e["shape"]) {
        check(s.is_number_unsigned(), op, "'{}': tensor '{}' has a non-integer or negative size", path, name);
        shape.push_back(s.get<std::size_t>());
        check(shape.back() == 0 || numel <= SIZE_MAX / shape.back(), op, "'{}': tensor '{}' is too large", path, name);
        numel *= shape.back();
    }
    check(numel <= SIZE_MAX / elem, op, "'{}': tensor '{}' of shape {} is too large", path, name,
          shape_str(shape));
    const auto& offs = e["data_offsets"];
    check(offs[0].is_number_unsigned() && offs[1].is_number_unsigned(), op,
          "'{}': tensor '{}' has invalid data_offsets", path, name);
    const std::size_t begin = offs[0].get<std::size_t>(), end = offs[1].get<std::size_t>();
    check(begin <= end && end <= data_size, op,
          "'{}': tensor '{}' spans bytes [{}, {}) but the data section has {} bytes (truncated file?)",
          path, name, begin, end, data_size);
    check(end - begin == numel * elem, op,
          "'{}': tensor '{}' of shape {} {} needs {} bytes but data_offsets give {}", path, name,
          shape_str(shape), dtype, numel * elem, end - begin);

    checked_numel(shape, op);  // bounds every size, even beside a 0
    Array a(shape);
    const char* src = data + begin;
    for (std::size_t i = 0; i < numel; ++i) {
        if (elem == 4) {
            float v;
            std::memcpy(&v, src + 4 * i, 4);
            a.data()[i] = static_cast<real>(v);
        } else {
            double v;
            std::memcpy(&v, src + 8 * i, 8);
            a.data()[i] = static_cast<real>(v);
        }
    }
    span = {begin, end, name};
    return a;
}

// The tensors in file order (JSON objects are parsed in key order), checked to tile the data
// section exactly, as the reference reader demands: the indices into `spans`, by offset.
std::vector<std::size_t> file_order(const std::vector<TensorSpan>& spans, std::size_t data_size,
                                    const std::string& path) {
    const char* op = "load_safetensors";
    std::vector<std::size_t> idx(spans.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        return std::tie(spans[a].begin, spans[a].end) < std::tie(spans[b].begin, spans[b].end);
    });
    std::size_t expected = 0;
    for (std::size_t i : idx) {
        const TensorSpan& t = spans[i];
        check(t.begin >= expected, op,
              "'{}': tensor '{}' starts at byte {}, inside the previous tensor, which ends at {} (overlap)", path,
              t.name, t.begin, expected);
        check(t.begin == expected, op, "'{}': tensor '{}' starts at byte {}, but the previous tensor ends at {} (a gap)",
              path, t.name, t.begin, expected);
        expected = t.end;
    }
    check(expected == data_size, op, "'{}': {} trailing byte(s) after the last tensor (the data section has {} bytes)",
          path, data_size - expected, data_size);
    return idx;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path, const LoadOptions& options) {
    check(host_is_little_endian(), "load_safetensors", "big-endian hosts are not supported");
    const std::string bytes = read_checkpoint_bytes(path);
    const char* op = "load_safetensors";

    check(bytes.size() >= 8, op, "'{}' is {} bytes, too short for the 8-byte header length", path, bytes.size());
    const bool stamped = verify_checksum(bytes, path, options);
    std::uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    check(n <= kMaxHeader && n <= bytes.size() - 8, op,
          "'{}' declares a {}-byte header but has {} bytes after the length (limit 100 MB)", path, n,
          bytes.size() - 8);
    const nlohmann::json header = parse_safetensors_header(std::string_view(bytes.data() + 8, n), path);
    const std::size_t data_begin = 8 + n, data_size = bytes.size() - data_begin;

    SafetensorsFile file;
    std::vector<TensorSpan> spans;  // one per tensor, in header (key) order
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const auto& e = it.value();
        if (name == "__metadata__") {
            check(e.is_object(), op, "'{}': __metadata__ is not an object", path);
            for (auto m = e.begin(); m != e.end(); ++m) {
                check(m.value().is_string(), op, "'{}': metadata '{}' is not a string", path, m.key());
                file.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        TensorSpan span;
        Array a = read_safetensors_entry(name, e, bytes.data() + data_begin, data_size, path, span);
        spans.push_back(std::move(span));
        file.tensors.emplace_back(name, from_array(std::move(a)));
    }
    const std::vector<std::size_t> idx = file_order(spans, data_size, path);
    // Verified above; or else it must be absent: a checksum key away from the stamp is a damaged
    // or forged xgrad header, which the opt-out does not cover.
    check(stamped || file.metadata.count(kChecksumKey) == 0, op,
          "'{}': the metadata holds '{}' but not as the header's first entry, where xgrad writes it and "
          "checks it: the header is damaged", path, kChecksumKey);
    file.metadata.erase(kChecksumKey);
    file.verified = stamped;
    NamedTensors sorted;
    for (std::size_t i : idx) sorted.push_back(std::move(file.tensors[i]));
    file.tensors = std::move(sorted);
    return file;
}

}  // namespace xgrad::nn
