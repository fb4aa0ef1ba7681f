// data/shards.cpp — llm.c's token shards: written through io::AtomicFile, read through mmap(2).
#include <xgrad/data/shards.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/io/atomic_file.hpp>

// Tokens are copied between memory and disk as they lie in memory; the format is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "data/shards.cpp assumes a little-endian machine");

namespace xgrad::data {

// ---- TokenView -------------------------------------------------------------------------------------
std::int64_t TokenView::operator[](std::size_t i) const {
    switch (width_) {
    case 2: return static_cast<const std::uint16_t*>(data_)[i];
    case 4: return static_cast<const std::uint32_t*>(data_)[i];
    default: return static_cast<const std::int64_t*>(data_)[i];
    }
}

TokenView TokenView::slice(std::size_t begin, std::size_t end) const {
    if (begin > end || end > size_)
        throw IndexError(fmt::format("TokenView::slice: tokens [{}, {}) outside [0, {}]", begin, end, size_));
    TokenView v = *this;
    v.data_ = static_cast<const char*>(data_) + begin * std::size_t(width_);
    v.size_ = end - begin;
    return v;
}

void TokenView::copy_to(std::size_t begin, std::size_t n, std::int64_t* out) const {
    // One switch per window, then a plain widening copy the compiler vectorises.
    switch (width_) {
    case 2: std::copy_n(static_cast<const std::uint16_t*>(data_) + begin, n, out); break;
    case 4: std::copy_n(static_cast<const std::uint32_t*>(data_) + begin, n, out); break;
    default: std::copy_n(static_cast<const std::int64_t*>(data_) + begin, n, out); break;
    }
}

std::vector<std::int64_t> TokenView::to_vector() const {
    std::vector<std::int64_t> ids(size_);
    copy_to(0, size_, ids.data());
    return ids;
}

// ---- writing ---------------------------------------------------------------------------------------
static void check_shard_vocab(const char* op, const std::string& path, std::int64_t vocab_size) {
    if (vocab_size < 1 || vocab_size > kMaxVocab)
        throw ValueError(fmt::format("{}: '{}': vocabulary size V {} outside [1, 2^32 = {}]", op, path, vocab_size,
                                     kMaxVocab));
}

static void put_le32(unsigned char* at, std::uint32_t v) {
    for (int k = 0; k < 4; ++k) at[k] = static_cast<unsigned char>(v >> (8 * k));
}
static std::uint32_t get_le32(const unsigned char* at) {
    return std::uint32_t(at[0]) | std::uint32_t(at[1]) << 8 | std::uint32_t(at[2]) << 16 | std::uint32_t(at[3]) << 24;
}

// The ids `ids[0..n)` narrowed to Word (uint16 or uint32) in chunks of 64 Ki tokens, each id
// checked against [0, V) on the way; an error leaves the target as it was (AtomicFile discards).
template <class Word>
static void write_shard_tokens(io::AtomicFile& file, const std::int64_t* ids, std::size_t n, std::int64_t vocab_size) {
    constexpr std::size_t kChunk = std::size_t(1) << 16;
    std::vector<Word> buf(std::min(n, kChunk));
    for (std::size_t start = 0; start < n; start += kChunk) {
        const std::size_t m = std::min(kChunk, n - start);
        for (std::size_t i = 0; i < m; ++i) {
            const std::int64_t id = ids[start + i];
            if (id < 0 || id >= vocab_size)
                throw IndexError(fmt::format("write_shard: '{}': id {} at position {} out of range [0, {})",
                                             file.path(), id, start + i, vocab_size));
            buf[i] = static_cast<Word>(id);
        }
        file.write(buf.data(), m * sizeof(Word));
    }
}

static void write_shard_of(const std::string& path, const std::int64_t* ids, std::size_t n, std::int64_t vocab_size) {
    check_shard_vocab("write_shard", path, vocab_size);
    if (n > std::size_t(kShardMaxTokens))
        throw ValueError(fmt::format("write_shard: '{}': {} tokens, above the {} a shard's int32 count holds", path, n,
                                     kShardMaxTokens));
    const bool wide = shard_token_bytes(vocab_size) == 4;
    std::array<unsigned char, kShardHeaderBytes> header{};
    put_le32(&header[0], std::uint32_t(wide ? kShardMagicU32 : kShardMagicU16));
    put_le32(&header[4], std::uint32_t(wide ? kShardVersionU32 : kShardVersionU16));
    put_le32(&header[8], std::uint32_t(n));
    put_le32(&header[4 * kShardVocabSlot], std::uint32_t(vocab_size));  // 2^32 wraps to 0: "not recorded"
    io::AtomicFile file(path, "write_shard");
    file.write(header.data(), header.size());
    if (wide) write_shard_tokens<std::uint32_t>(file, ids, n, vocab_size);
    else write_shard_tokens<std::uint16_t>(file, ids, n, vocab_size);
    file.commit();
}

void write_shard(const std::string& path, const std::vector<std::int64_t>& ids, std::int64_t vocab_size) {
    write_shard_of(path, ids.data(), ids.size(), vocab_size);
}

// ---- reading ---------------------------------------------------------------------------------------
// The position of the first token ≥ V in p[0..n), or n.
template <class Word>
static std::size_t first_id_at_or_above(const Word* p, std::size_t n, std::uint64_t vocab_size) {
    if (vocab_size > std::uint64_t(std::numeric_limits<Word>::max())) return n;  // every Word is an id
    return std::size_t(std::find_if(p, p + n, [&](Word w) { return std::uint64_t(w) >= vocab_size; }) - p);
}

TokenShard::TokenShard(const std::string& path, std::int64_t vocab_size) : path_(path) {
    check_shard_vocab("TokenShard", path, vocab_size);
    const std::string kind = io::non_regular_kind(path);  // a FIFO would block in open()
    if (!kind.empty()) throw std::runtime_error(fmt::format("TokenShard: '{}' is {}, not a shard file", path, kind));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(fmt::format("TokenShard: cannot open '{}' ({})", path, std::strerror(errno)));
    struct stat st{};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error(fmt::format("TokenShard: cannot stat '{}' ({})", path, std::strerror(err)));
    }
    const std::size_t bytes = std::size_t(st.st_size);
    if (bytes < kShardHeaderBytes) {
        ::close(fd);
        throw std::runtime_error(fmt::format("TokenShard: '{}' has {} bytes, shorter than the {}-byte header", path,
                                             bytes, kShardHeaderBytes));
    }
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the map keeps the file
    if (map == MAP_FAILED) throw std::runtime_error(fmt::format("TokenShard: cannot map '{}' ({})", path, std::strerror(err)));
    map_ = map, map_bytes_ = bytes;
    try {
        open_mapped(vocab_size);
    } catch (...) {
        unmap();
        throw;
    }
}

// The header's checks, then the ids' (see the constructor's docstring).
void TokenShard::open_mapped(std::int64_t vocab_size) {
    const auto* h = static_cast<const unsigned char*>(map_);
    const std::int32_t magic = std::int32_t(get_le32(h)), version = std::int32_t(get_le32(h + 4));
    const std::int32_t count = std::int32_t(get_le32(h + 8));
    const std::uint32_t recorded = get_le32(h + 4 * kShardVocabSlot);
    if (magic != kShardMagicU16 && magic != kShardMagicU32)
        throw std::runtime_error(fmt::format("TokenShard: '{}' has magic {}; a shard starts with {} (uint16 tokens) "
                                             "or {} (uint32 tokens)", path_, magic, kShardMagicU16, kShardMagicU32));
    const bool wide = magic == kShardMagicU32;
    const std::int32_t want = wide ? kShardVersionU32 : kShardVersionU16;
    if (version != want)
        throw std::runtime_error(fmt::format("TokenShard: '{}' has version {}; magic {} has version {} only", path_,
                                             version, magic, want));
    if (count < 0)
        throw std::runtime_error(fmt::format("TokenShard: '{}' has a negative token count {}", path_, count));
    const std::size_t n = std::size_t(count), w = wide ? 4 : 2, expected = kShardHeaderBytes + n * w;
    if (map_bytes_ != expected)
        throw std::runtime_error(fmt::format("TokenShard: '{}' has {} bytes, but its header counts {} tokens of {} bytes: "
                                             "{} + {}·{} = {} bytes ({})", path_, map_bytes_, n, w, kShardHeaderBytes, n,
                                             w, expected, map_bytes_ < expected ? "truncated" : "trailing bytes"));
    if (recorded != 0 && std::int64_t(recorded) > vocab_size)
        throw std::runtime_error(fmt::format("TokenShard: '{}' was written for V {} (header[{}]), above the V {} it "
                                             "is opened for", path_, recorded, kShardVocabSlot, vocab_size));
    const void* tokens = h + kShardHeaderBytes;
    view_ = wide ? TokenView(static_cast<const std::uint32_t*>(tokens), n)
                 : TokenView(static_cast<const std::uint16_t*>(tokens), n);
    const std::size_t bad = wide ? first_id_at_or_above(static_cast<const std::uint32_t*>(tokens), n, std::uint64_t(vocab_size))
                                 : first_id_at_or_above(static_cast<const std::uint16_t*>(tokens), n, std::uint64_t(vocab_size));
    if (bad < n)
        throw IndexError(fmt::format("TokenShard: '{}': id {} at position {} out of range [0, {})", path_, view_[bad],
                                     bad, vocab_size));
    vocab_size_ = recorded != 0 ? std::int64_t(recorded) : vocab_size;
}

TokenShard::~TokenShard() { unmap(); }

void TokenShard::unmap() noexcept {
    if (map_) ::munmap(map_, map_bytes_);
    map_ = nullptr, map_bytes_ = 0, view_ = TokenView();
}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)), map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)), view_(std::exchange(other.view_, TokenView())),
      vocab_size_(other.vocab_size_) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
    if (this != &other) {
        unmap();
        path_ = std::move(other.path_);
        map_ = std::exchange(other.map_, nullptr);
        map_bytes_ = std::exchange(other.map_bytes_, 0);
        view_ = std::exchange(other.view_, TokenView());
        vocab_size_ = other.vocab_size_;
    }
    return *this;
}

std::int64_t TokenShard::at(std::size_t i) const {
    if (i >= size()) throw IndexError(fmt::format("TokenShard::at: '{}': position {} out of range [0, {})", path_, i, size()));
    return view_[i];
}

// ---- the train / validation split ------------------------------------------------------------------
// n_train = ⌊9N/10⌋; each part must hold one window of T + 1 tokens.
static std::size_t checked_train_count(std::size_t n, int block, const std::string& source) {
    if (block < 1) throw ValueError(fmt::format("{}: block {} must be at least 1", source, block));
    const std::size_t n_train = n * 9 / 10, window = std::size_t(block) + 1;
    if (n_train < window || n - n_train < window)
        throw std::runtime_error(fmt::format(
            "{}: the text has {} characters: train {} and validation {} (the last 10%), but each needs at least "
            "one window of block + 1 = {} characters; give a text of at least {} characters or a smaller "
            "--block-size",
            source, n, n_train, n - n_train, window, 10 * window));
    return n_train;
}

Split split_ids(const std::vector<std::int64_t>& ids, int block, const std::string& source) {
    const auto cut = ids.begin() + std::ptrdiff_t(checked_train_count(ids.size(), block, source));
    return {std::vector<std::int64_t>(ids.begin(), cut), std::vector<std::int64_t>(cut, ids.end())};
}

SplitCounts write_train_val_shards(const std::string& train_path, const std::string& val_path,
                                   const std::vector<std::int64_t>& ids, std::int64_t vocab_size, int block,
                                   const std::string& source) {
    const std::size_t n = ids.size(), n_train = checked_train_count(n, block, source);
    write_shard_of(train_path, ids.data(), n_train, vocab_size);
    write_shard_of(val_path, ids.data() + n_train, n - n_train, vocab_size);
    return {n_train, n - n_train};
}

}  // namespace xgrad::data
