// nn/serialize.hpp — safetensors files: the checkpoint format of xgrad.
//
// Layout (https://github.com/huggingface/safetensors, "Format"):
//
//   bytes [0, 8)        N, the header length, an unsigned 64-bit little-endian integer
//   bytes [8, 8+N)      a UTF-8 JSON object, padded with spaces to a multiple of 8:
//                       {"fc1.weight": {"dtype": "F32", "shape": [20, 10],
//                                       "data_offsets": [0, 800]},
//                        ...,
//                        "__metadata__": {"format": "pt"}}
//   bytes [8+N, end)    the tensors' raw little-endian, row-major bytes, back to back;
//                       data_offsets are relative to byte 8+N
//
// So a file written here opens in Python with safetensors.torch.load_file(path).
#pragma once

#include <map>
#include <string>

#include "core/tensor.hpp"

namespace xgrad::nn {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
    NamedTensors tensors;  // in file order of data_offsets
    Metadata metadata;     // the "__metadata__" object (string → string)
};

// Writes `tensors` (dtype F32 in the float build, F64 in the double build) and `metadata`.
// Atomic: the bytes go to "<path>.tmp-<pid>" first, which is renamed over `path` only after
// a successful write, so a crash never leaves a half-written checkpoint. Throws ValueError
// for duplicate, empty or non-UTF-8 names and undefined tensors, std::runtime_error for I/O
// errors (the temporary file is removed).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// Reads and validates a whole file: header length within the file and ≤ 100 MB, valid JSON
// without duplicate keys, known dtypes (F32, F64; converted to `real`), shapes whose byte size
// matches their offsets, and tensors that tile the data section exactly (no overlap, no gap,
// no trailing bytes), as the reference reader requires. Throws std::runtime_error if the file
// cannot be read (missing, or not a regular file) and ValueError (naming the file and the
// problem) if it is malformed or truncated.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace xgrad::nn
