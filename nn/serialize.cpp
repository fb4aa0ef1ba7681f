// nn/serialize.cpp — safetensors writer and validating reader (layout in nn/serialize.hpp).
#include <xgrad/nn/serialize.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
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

#include <xgrad/core/parse.hpp>

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

std::uint32_t crc32_update(std::uint32_t crc, const void* bytes, std::size_t n) {
    return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(bytes), n));
}

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
    std::uint32_t actual = crc32_update(crc32_update(0, nullptr, 0), bytes.data(), kDigitsAt);
    actual = crc32_update(actual, bytes.data() + kDigitsAt + 8, bytes.size() - kDigitsAt - 8);
    check(actual == *recorded, op,
          "'{}' is corrupted or truncated: the CRC-32 of its {} bytes (all but the checksum's 8 digits) is "
          "{:08x}, but its header records {:08x}", path, bytes.size(), actual, *recorded);
    return true;
}

// ---- temporary files -------------------------------------------------------------------------
// A save writes "<path>.tmp-<pid>-<n>", n counting this process's saves: unique per save even
// across threads saving to one path. O_EXCL refuses an existing name.
std::atomic<std::uint64_t> g_save_count{0};

// The directory of `path` ("." for a bare file name).
std::filesystem::path directory_of(const std::string& path) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    return dir.empty() ? std::filesystem::path(".") : dir;
}

// Removes "<path>.tmp-<pid>[-<n>]" files whose process has died (kill(pid, 0) fails with ESRCH);
// this process's and live pids' temps are kept. Assumes writers share this machine's pid
// namespace. Errors are ignored: cleaning never fails a save.
void remove_stale_temps(const std::string& path) {
    namespace fs = std::filesystem;
    const std::string prefix = fs::path(path).filename().string() + ".tmp-";
    std::vector<fs::path> stale;
    std::error_code ec;
    for (fs::directory_iterator it(directory_of(path), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string_view rest = std::string_view(name).substr(prefix.size());
        const std::size_t dash = rest.find('-');
        const auto pid = try_parse_int64(rest.substr(0, dash));
        if (!pid || *pid <= 0 || *pid > INT_MAX || rest[0] == '-') continue;
        if (dash != std::string_view::npos) {
            const auto n = try_parse_int64(rest.substr(dash + 1));
            if (!n || *n < 0 || rest[dash + 1] == '-') continue;
        }
        if (*pid == ::getpid()) continue;
        if (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno != ESRCH) continue;  // alive, or EPERM
        stale.push_back(it->path());
    }
    for (const auto& p : stale) fs::remove(p, ec);
}

// ---- where a save writes ----------------------------------------------------------------------
// rename(2) replaces a directory entry, whatever it is: a symlink would become a regular file (its
// target keeping the old bytes) and a FIFO or a device node would be replaced. So the target is
// resolved first, as open(2) resolves it: symlinks followed (40 hops at most, Linux's limit), a
// missing final name is a new file. A target that exists must be a regular file.
struct SaveTarget {
    std::string path;                 // the file to replace or create
    std::optional<mode_t> old_mode;   // its permission bits, if it exists
};

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

SaveTarget save_target(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path p(path);
    for (int hops = 0;; ++hops) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0) return {p.string(), std::nullopt};  // new; or open() reports why not
        if (S_ISREG(st.st_mode)) return {p.string(), st.st_mode & 0777};
        if (!S_ISLNK(st.st_mode)) {
            const std::string via = p.string() == path ? "" : fmt::format(" (through symlinks, '{}')", p.string());
            throw std::runtime_error(fmt::format("save_safetensors: '{}'{} is {}; a save replaces only a regular "
                                                 "file or creates a new one", path, via, kind_of(st.st_mode)));
        }
        if (hops == 40)
            throw std::runtime_error(fmt::format("save_safetensors: '{}': too many levels of symbolic links (a loop?)",
                                                 path));
        std::error_code ec;
        const fs::path next = fs::read_symlink(p, ec);
        if (ec) return {p.string(), std::nullopt};  // removed meanwhile: the rename replaces the name itself
        p = next.is_absolute() ? next : p.parent_path() / next;
    }
}

// Makes a rename durable. True on success, and where a directory cannot be synced (EINVAL).
bool fsync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0 || errno == EINVAL;
    ::close(fd);
    return ok;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
    check(host_is_little_endian(), "save_safetensors", "big-endian hosts are not supported");
    check(metadata.count(kChecksumKey) == 0, "save_safetensors",
          "the metadata key '{}' is reserved: xgrad writes the file's checksum there", kChecksumKey);
    nlohmann::json entries = nlohmann::json::object();
    std::set<std::string> names;
    std::size_t offset = 0;
    for (const auto& [name, t] : tensors) {
        check(!name.empty() && name != "__metadata__", "save_safetensors", "invalid tensor name '{}'", name);
        check(names.insert(name).second, "save_safetensors", "duplicate tensor name '{}'", name);
        check(t.defined(), "save_safetensors", "tensor '{}' is undefined", name);
        const std::size_t bytes = t.numel() * sizeof(real);
        entries[name] = {{"dtype", kDtype}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
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
    std::uint32_t crc = crc32_update(crc32_update(0, nullptr, 0), &n, 8);
    crc = crc32_update(crc32_update(crc, kStampPrefix.data(), kStampPrefix.size()), tail.data(), tail.size());
    for (const auto& [_, t] : tensors)
        if (t.numel() > 0) crc = crc32_update(crc, t.data().data(), t.numel() * sizeof(real));
    const std::string text = kStampPrefix + fmt::format("{:08x}", crc) + tail;

    const SaveTarget target = save_target(path);
    remove_stale_temps(target.path);
    // Temporary file, fsync, rename (atomic: readers see the old file or the new), sync the directory.
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {  // a name left by a dead pid's save
        tmp = fmt::format("{}.tmp-{}-{}", target.path, ::getpid(), g_save_count.fetch_add(1));
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // 0666 & ~umask
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        throw std::runtime_error(fmt::format("save_safetensors: cannot create '{}' for writing: {}", tmp,
                                             std::strerror(errno)));
    if (target.old_mode) (void)::fchmod(fd, *target.old_mode);  // best effort, as cp -p
    std::FILE* out = ::fdopen(fd, "wb");
    if (!out) {
        ::close(fd);
        std::remove(tmp.c_str());
        throw std::runtime_error("save_safetensors: cannot write '" + tmp + "'");
    }
    bool ok = std::fwrite(&n, 8, 1, out) == 1 && std::fwrite(text.data(), 1, text.size(), out) == text.size();
    for (const auto& [_, t] : tensors) {
        if (!ok) break;
        if (t.numel() == 0) continue;  // an empty array's data() may be null, which fwrite must not get
        ok = std::fwrite(t.data().data(), sizeof(real), t.data().size(), out) == t.data().size();
    }
    ok = ok && std::fflush(out) == 0 && ::fsync(::fileno(out)) == 0;
    ok = (std::fclose(out) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), target.path.c_str()) != 0) {
        const int err = errno;
        std::remove(tmp.c_str());
        throw std::runtime_error(fmt::format("save_safetensors: writing '{}' failed (via '{}'): {}", path, tmp,
                                             std::strerror(err)));
    }
    if (!fsync_directory(directory_of(target.path)))
        throw std::runtime_error(fmt::format("save_safetensors: '{}' was written, but syncing its directory "
                                             "failed ({}): the new file may not survive a power cut",
                                             path, std::strerror(errno)));
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
    NamedTensors sorted;
    for (std::size_t i : idx) sorted.push_back(std::move(file.tensors[i]));
    file.tensors = std::move(sorted);
    return file;
}

}  // namespace xgrad::nn
