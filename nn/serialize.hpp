// nn/serialize.hpp — safetensors files: the checkpoint format of xgrad.
//
// Layout (https://github.com/huggingface/safetensors, "Format"):
//   bytes [0, 8)        N, the header length, an unsigned 64-bit little-endian integer
//   bytes [8, 8+N)      a UTF-8 JSON object, padded with spaces to a multiple of 8; xgrad writes
//                       __metadata__ first, and its checksum first in it:
//                       {"__metadata__":{"xgrad.crc32":"<8 hex digits>","format":"pt"},
//                        "fc1.weight":{"dtype":"F32","shape":[20,10],"data_offsets":[0,800]},...}
//   bytes [8+N, end)    the tensors' raw little-endian, row-major bytes, back to back;
//                       data_offsets are relative to byte 8+N
// The checksum is zlib's CRC-32 of every byte of the file but its own 8 hex digits, bytes [40, 48)
// (in Python, zlib.crc32(b[:40] + b[48:])): it catches any change of up to 32 adjacent bits, others
// but with probability 2^-32; it detects damage, not tampering. As one more metadata string it
// leaves the file readable by Python's safetensors.torch.load_file(path).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
    NamedTensors tensors;  // in file order of data_offsets
    Metadata metadata;     // the "__metadata__" object (string → string), without "xgrad.crc32"
    bool verified = false; // the file had xgrad's checksum and it matched (false: loaded unverified)
};

// Writes `tensors` (dtype F32 in the float build, F64 in the double build), `metadata` and the
// checksum (the key "xgrad.crc32" is reserved for it).
// Written through io::AtomicFile (io/atomic_file.hpp), one tensor after another straight from its
// array, with no copy of the state: a crash never leaves a half-written file, a symlink is written
// through (a dangling one's target is created, as torch.save does), a replaced file keeps its
// permission bits, and a dead process's temporary is removed by the next save to the same path.
// Throws ValueError for duplicate, empty or non-UTF-8 names, undefined tensors, the reserved
// metadata key or a header over the 100 MB load_safetensors reads (all before any file is
// touched); io::AtomicFile's std::runtime_error (the target not a regular file, a missing
// directory, no permission, a full disk: each naming the path, the file left as it was).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// A tensor's bytes where they already live: its name and its array, not owned (it must outlive
// the save). For a state kept in arrays rather than tensors, e.g. an optimizer's moments
// (optim::Optimizer::state_buffers), written with no copy of it.
struct ArrayRef {
    std::string name;
    const Array* array = nullptr;
};
// The same file from arrays: the same checks, and ValueError for a null array.
void save_safetensors_arrays(const std::string& path, const std::vector<ArrayRef>& arrays,
                             const Metadata& metadata = {});

// How load_safetensors treats a file without xgrad's checksum; setters chain, as LibTorch's options.
//   nn::load_safetensors(path, nn::LoadOptions().require_checksum(false))   // e.g. written by Python
class LoadOptions {
public:
    // true (default): refuse a file without the checksum. false: load it unverified. Either way a
    // checksum that is present is verified, and a damaged one (a stamp a few bits off, or the key
    // "xgrad.crc32" anywhere but first) is refused: the opt-out is for other tools' files.
    LoadOptions& require_checksum(bool v) { require_checksum_ = v; return *this; }
    bool require_checksum() const { return require_checksum_; }

private:
    bool require_checksum_ = true;
};

// Reads and validates a whole file: the checksum first (see the layout above), then a header
// ≤ 100 MB, one space-padded JSON object without duplicate keys; dtypes F32 or F64 (converted to
// `real`); shapes matching their offsets; tensors tiling the data section exactly.
// Throws std::runtime_error if the file cannot be read (missing, or not a regular file) and
// ValueError (naming the file and the problem) if it is malformed, truncated, corrupted, or has
// no checksum while options.require_checksum() (the message says how to opt out).
SafetensorsFile load_safetensors(const std::string& path, const LoadOptions& options = LoadOptions());

}  // namespace xgrad::nn
