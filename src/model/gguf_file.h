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
// Ownership: the GgufFile owns the mapping (or borrows the caller's buffer for
// FromBuffer); string_views and tensor data pointers it hands out live as long as it.
// Thread safety: immutable after Open; all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/tensor_type.h"

namespace tandem {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars fill exactly one of the fields by type; arrays fill
// `array_type` and `array` (elements may themselves be arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u64 = 0;          // kUint8/16/32/64
  int64_t i64 = 0;           // kInt8/16/32/64
  double f64 = 0;            // kFloat32/64
  bool b = false;            // kBool
  std::string_view str;      // kString (view into the file)
  GgufValueType array_type = GgufValueType::kUint8;
  std::vector<GgufValue> array;

  bool IsInteger() const;
  bool IsFloat() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] = contiguous row length (ggml "ne")
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;        // relative to the data section
  const uint8_t* data = nullptr;
  uint64_t size_bytes = 0;
  int64_t num_elements = 0;

  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t num_rows() const { return dims.empty() ? 1 : num_elements / dims[0]; }
};

class GgufFile {
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
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }

  // Metadata in file order, and lookup by key (nullptr if absent).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: NotFound if absent, InvalidArgument naming the key if the type differs.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<uint64_t> GetUint(std::string_view key) const;   // any non-negative integer type
  StatusOr<int64_t> GetInt(std::string_view key) const;     // any integer type
  StatusOr<double> GetFloat(std::string_view key) const;    // float32/64 or integer
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Defaults when the key is absent (errors still returned on a type mismatch).
  StatusOr<uint64_t> GetUintOr(std::string_view key, uint64_t fallback) const;
  StatusOr<double> GetFloatOr(std::string_view key, double fallback) const;
  StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;
  StatusOr<std::string> GetStringOr(std::string_view key, std::string fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tandem
