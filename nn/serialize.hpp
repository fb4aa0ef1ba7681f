// nn/serialize.hpp — safetensors files: the checkpoint format of xgrad.
//
// Layout (https://github.com/huggingface/safetensors, "Format"):
//   bytes [0, 8)        N, the header length, an unsigned 64-bit little-endian integer
//   bytes [8, 8+N)      a UTF-8 JSON object, padded with spaces to a multiple of 8:
//                       {"fc1.weight": {"dtype": "F32", "shape": [20, 10], "data_offsets": [0, 800]},
//                        ..., "__metadata__": {"format": "pt"}}
//   bytes [8+N, end)    the tensors' raw little-endian, row-major bytes, back to back;
//                       data_offsets are relative to byte 8+N
//
// So a file written here opens in Python with safetensors.torch.load_file(path).
#pragma once

#include <map>
#include <string>

#include <xgrad/core/tensor.hpp>

namespace xgrad::nn {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
    NamedTensors tensors;  // in file order of data_offsets
    Metadata metadata;     // the "__metadata__" object (string → string)
};

// Writes `tensors` (dtype F32 in the float build, F64 in the double build) and `metadata`,
// adding the data section's CRC-32 (zlib's crc32, 8 lowercase hex digits) to __metadata__
// under the reserved key "xgrad.data_crc32".
// Atomic: a per-save temp file, fsynced and renamed over `path`, then the directory fsynced. A
// crash never leaves a half-written `path`; concurrent saves leave one complete file; a dead
// process's temp is removed by the next save to the same path.
// Throws ValueError for duplicate, empty or non-UTF-8 names, undefined tensors or the reserved
// metadata key; std::runtime_error for I/O errors (naming the path and the system's reason).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// Reads and validates a whole file: header ≤ 100 MB, one space-padded JSON object without
// duplicate keys; dtypes F32 or F64 (converted to `real`); shapes matching their offsets;
// tensors tiling the data section exactly; and the CRC-32 when "xgrad.data_crc32" is recorded
// (other tools' files lack it and still load; the key is not returned in `metadata`).
// Throws std::runtime_error if the file cannot be read (missing, or not a regular file) and
// ValueError (naming the file and the problem) if it is malformed, truncated or corrupted.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace xgrad::nn
