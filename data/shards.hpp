// data/shards.hpp — token ids on disk in llm.c's shard format, read back through a memory map.
//
// Legend: N tokens in a shard, V vocabulary size (ids in [0, V)), T block (tokens of context).
//
//   byte 0                  1024                                    1024 + N·w
//        │ header: 256 int32 │ token 0 │ token 1 │ … │ token N−1 │     w = 2 (uint16) or 4 (uint32)
//
//   header[0]  magic     20240520 (GPT-2 shards, uint16 tokens)  or 20240801 (LLaMA-3, uint32)
//   header[1]  version   1                                       or 7
//   header[2]  N, the number of tokens after the header (llm.c writes at most 2^31 − 1)
//   header[3]  V as a uint32, 0: not recorded (llm.c writes 0 and ignores it: the files are llm.c's)
//   header[4..255]  0;  every number little-endian; uint16 while V ≤ 65,536, else uint32
// Opened read-only with mmap(2): no copy until a window touches the tokens; ranks share the pages.
// ref: llm.c, dev/data/data_common.py (write_datafile, HEADERS_INFO) and llmc/dataloader.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xgrad::data {

// ---- the format's constants (llm.c's values) ------------------------------------------------------
inline constexpr std::int32_t kShardMagicU16 = 20240520, kShardVersionU16 = 1;  // "gpt-2"
inline constexpr std::int32_t kShardMagicU32 = 20240801, kShardVersionU32 = 7;  // "llama-3"
inline constexpr std::size_t kShardHeaderInts = 256;
inline constexpr std::size_t kShardHeaderBytes = kShardHeaderInts * 4;  // 1024 bytes
inline constexpr std::size_t kShardVocabSlot = 3;                       // header[3] = V
inline constexpr std::int64_t kShardMaxTokens = (std::int64_t(1) << 31) - 1;  // N fits header[2]
inline constexpr std::int64_t kMaxVocab = std::int64_t(1) << 32;               // every uint32 an id

// Bytes per token on disk for a vocabulary of V ids: 2 while V ≤ 65,536, else 4.
inline int shard_token_bytes(std::int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// ---- a view of tokens ------------------------------------------------------------------------------
// N contiguous tokens stored as uint16, uint32 (a shard's) or int64 (a std::vector of ids), read as
// int64. It does not own them: the shard or vector must outlive the view.
class TokenView {
public:
    TokenView() = default;
    TokenView(const std::vector<std::int64_t>& ids) : data_(ids.data()), size_(ids.size()), width_(8) {}  // NOLINT: implicit
    TokenView(const std::uint16_t* p, std::size_t n) : data_(p), size_(n), width_(2) {}
    TokenView(const std::uint32_t* p, std::size_t n) : data_(p), size_(n), width_(4) {}
    TokenView(const std::int64_t* p, std::size_t n) : data_(p), size_(n), width_(8) {}

    std::size_t size() const { return size_; }        // N tokens
    int bytes_per_token() const { return width_; }     // 2, 4 or 8
    std::int64_t operator[](std::size_t i) const;      // token i, unchecked
    // Tokens [begin, end). Throws IndexError naming "TokenView::slice", the range and N.
    TokenView slice(std::size_t begin, std::size_t end) const;
    // out[0..n) = tokens [begin, begin + n) as int64, unchecked: the loop a window copy runs.
    void copy_to(std::size_t begin, std::size_t n, std::int64_t* out) const;
    std::vector<std::int64_t> to_vector() const;       // (N,) int64

private:
    const void* data_ = nullptr;
    std::size_t size_ = 0;
    int width_ = 8;
};

// ---- writing ---------------------------------------------------------------------------------------
// Writes `ids` (N,) as a shard at `path` for a vocabulary of V = `vocab_size` ids: the header,
// then the ids as uint16 (V ≤ 65,536) or uint32, streamed through io::AtomicFile (the file
// appears whole or not at all). Size on disk: 1024 + N·w bytes.
// Throws ValueError naming "write_shard" and the path for V outside [1, 2^32] or N above
// 2^31 − 1; IndexError naming the position and value of the first id outside [0, V) (nothing is
// then written); std::runtime_error from io::AtomicFile (a missing directory, a full disk, ...).
void write_shard(const std::string& path, const std::vector<std::int64_t>& ids, std::int64_t vocab_size);

// ---- reading ---------------------------------------------------------------------------------------
// A shard opened read-only and memory-mapped; movable, not copyable (the map is unmapped once).
// The file must not shrink while it is open: a token past the new end raises SIGBUS on access,
// which no check can turn into an exception (write_shard replaces a file by rename, which keeps
// an open map's old file whole).
class TokenShard {
public:
    // Opens `path` for ids in [0, V) with V = `vocab_size` (the V the model was built for).
    // Every check runs once, here. Throws ValueError for V outside [1, 2^32]; std::runtime_error
    // naming "TokenShard", the path and the value for: a path that is not a regular file, a file
    // that cannot be opened or mapped, a file shorter than the 1024-byte header, a wrong magic, a
    // version the magic does not have, a negative count, a file size other than 1024 + N·w bytes
    // (truncated, or trailing bytes), a recorded V above `vocab_size`; IndexError naming the
    // position and value of the first id ≥ `vocab_size`.
    TokenShard(const std::string& path, std::int64_t vocab_size);
    ~TokenShard();
    TokenShard(TokenShard&& other) noexcept;
    TokenShard& operator=(TokenShard&& other) noexcept;
    TokenShard(const TokenShard&) = delete;
    TokenShard& operator=(const TokenShard&) = delete;

    std::size_t size() const { return view_.size(); }  // N tokens
    // V: header[3] when the file records one, else the V given at open.
    std::int64_t vocab_size() const { return vocab_size_; }
    int bytes_per_token() const { return view_.bytes_per_token(); }  // 2 or 4
    std::int64_t operator[](std::size_t i) const { return view_[i]; }  // unchecked
    std::int64_t at(std::size_t i) const;  // IndexError naming "TokenShard::at", i and N
    TokenView view() const { return view_; }  // all N tokens
    TokenView view(std::size_t begin, std::size_t end) const { return view_.slice(begin, end); }
    const std::string& path() const { return path_; }

private:
    void open_mapped(std::int64_t vocab_size);
    void unmap() noexcept;
    std::string path_;
    void* map_ = nullptr;    // the whole file, PROT_READ
    std::size_t map_bytes_ = 0;
    TokenView view_;
    std::int64_t vocab_size_ = 0;
};

// ---- the train / validation split ------------------------------------------------------------------
struct Split {
    std::vector<std::int64_t> train, val;  // the first ⌊9N/10⌋ ids, and the rest (nanoGPT's split)
};
// Throws ValueError naming `source` for a block below 1; std::runtime_error (naming `source`, the
// lengths and the minimum) when either part is shorter than one window of block + 1 tokens, i.e.
// when the text has fewer than about 10·(block + 1) tokens.
Split split_ids(const std::vector<std::int64_t>& ids, int block, const std::string& source);

// The ids of a text as two shards: train_path gets the first ⌊9N/10⌋ ids, val_path the rest,
// cut as split_ids cuts them (and refused as it refuses). Returns the two token counts.
struct SplitCounts {
    std::size_t train = 0, val = 0;  // tokens
};
SplitCounts write_train_val_shards(const std::string& train_path, const std::string& val_path,
                                   const std::vector<std::int64_t>& ids, std::int64_t vocab_size, int block,
                                   const std::string& source);

}  // namespace xgrad::data
