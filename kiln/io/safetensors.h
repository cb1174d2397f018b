// safetensors checkpoints (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of UTF-8 JSON describing each tensor (dtype, shape, data_offsets) plus
// an optional "__metadata__" map of strings, then the raw little-endian data.
//
// Writing: tensors are stored in the order the reference writer uses (larger dtypes first, then by
// name), each contiguous, the header padded with spaces to a multiple of 8 — so files (and bytes)
// are identical to `safetensors.torch.save` for the same tensors and at most one metadata entry.
// Non-contiguous tensors are written contiguously; tensors that share storage are each written in
// full (the reference refuses them). complex128 has no safetensors code and is refused.
//
// Reading validates everything the reference implementation validates (header size <= 100 MB,
// UTF-8, JSON grammar, known dtypes, shape * itemsize == byte range, ranges contiguous and covering
// the data exactly) and additionally refuses duplicate keys. Any bad input raises kiln::Error (kind
// Value for a malformed file, Runtime for I/O failures) whose message starts with "[safetensors]"
// and names the file. Loading never executes code.
//
// load_file maps the file (MAP_PRIVATE, readable and writable: writes go to private copy-on-write
// pages and never reach the file); each tensor is a zero-copy view into that one mapping, which is
// unmapped when the last tensor dies. Tensors whose data is not aligned to their itemsize, and BOOL
// tensors holding bytes other than 0/1 (normalised to 0/1), are copied instead. A file truncated by
// another process while mapped can still raise SIGBUS on access, as with any mmap-based loader.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/core/ordered_dict.h"
#include "kiln/core/tensor.h"

namespace kiln {

// The state-dict type (kiln/core/ordered_dict.h): what Module::state_dict() gives and
// load_state_dict() takes. load_file keeps the file's order.
using TensorMap = TensorDict;
using MetadataMap = std::map<std::string, std::string>;

struct SafetensorsContents {
  TensorMap tensors;
  MetadataMap metadata;
};

void save_file(const TensorMap& tensors, const std::string& path, const MetadataMap& metadata = {});
TensorMap load_file(const std::string& path);
SafetensorsContents load_file_with_metadata(const std::string& path);

// In-memory round trips; loaded tensors own fresh copies of their data.
std::vector<uint8_t> save(const TensorMap& tensors, const MetadataMap& metadata = {});
TensorMap load(const std::vector<uint8_t>& bytes);
SafetensorsContents load_with_metadata(const void* data, size_t size);

// The safetensors dtype code ("F32", "BF16", "F8_E4M3", ...); raises for complex128.
std::string safetensors_dtype_code(Dtype d);

}  // namespace kiln
