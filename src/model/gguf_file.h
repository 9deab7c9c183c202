// GgufFile: a bounds-checked reader of GGUF v2/v3 model files over mmap.
//
// Format (little-endian): magic "GGUF", u32 version, u64 tensor_count,
// u64 metadata_kv_count, then the key/value pairs, then the tensor infos
// (name, n_dims, dims[n_dims] with dims[0] the contiguous row length, type, offset),
// then padding to `general.alignment` (default 32) and the tensor data section.
//
// Every count, length and offset is checked against the file size before it is used:
// a truncated or corrupted file gives a DataLoss/InvalidArgument Status naming the
// problem, never a crash or an over-read.
//
// A ModelSource (model_source.h): the metadata getters and the tensor table are its.
//
// Ownership: the GgufFile owns the mapping (or borrows the caller's buffer for
// FromBuffer); string_views and tensor data pointers it hands out live as long as it.
// Thread safety: immutable after Open; all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model_source.h"

namespace tandem {

class GgufFile : public ModelSource {
 public:
  // Maps and parses `path`.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a caller-owned buffer that must outlive the returned object.
  static StatusOr<std::unique_ptr<GgufFile>> FromBuffer(const uint8_t* data, size_t size);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

 private:
  GgufFile() = default;
  Status Parse();

  const uint8_t* base_ = nullptr;
  bool owns_mapping_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
};

}  // namespace tandem
