// ModelSource: what a model is loaded from, as the loader reads it — metadata under
// GGUF's keys (`general.architecture`, `<arch>.block_count`, `tokenizer.chat_template`,
// ...) and tensors under GGUF's names and layouts (`blk.N.attn_q.weight`, dims with the
// contiguous row length first) — whichever format holds the weights. Two readers fill
// it: GgufFile (a .gguf file, as stored) and HfCheckpoint (a Hugging Face checkpoint
// directory: config.json translated to the keys, safetensors tensors renamed and, where
// llama.cpp's convert_hf_to_gguf.py transforms them, transformed at load). The model
// config, the weight binder and the fingerprint read only this interface.
//
// Ownership: tensor data and string values point into memory the reader owns (a
// mapping, or buffers of converted tensors); they live as long as the source.
// Thread safety: immutable once the reader has filled it; const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/tensor_type.h"

namespace tandem {

struct Int8RowParams;

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
  // TensorType::kI8Rows only: the per-row scales (and static activation parameters)
  // the source keeps beside the int8 rows; for a 3-D tensor, one per matrix.
  const Int8RowParams* i8 = nullptr;

  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t num_rows() const { return dims.empty() ? 1 : num_elements / dims[0]; }
};

class ModelSource {
 public:
  virtual ~ModelSource() = default;

  // The file or directory the source was read from.
  const std::string& path() const { return path_; }
  // Bytes of the files behind it (a checkpoint's shards together).
  size_t file_size() const { return size_; }

  // Metadata in source order, and lookup by key (nullptr if absent).
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

 protected:
  ModelSource() = default;
  ModelSource(const ModelSource&) = delete;
  ModelSource& operator=(const ModelSource&) = delete;

  // For readers: add a key (DataLoss on a duplicate), a tensor (likewise), and keep a
  // string for a kString value to view.
  Status AddMetadata(std::string key, GgufValue value);
  Status AddTensor(GgufTensorInfo tensor);
  std::string_view KeepString(std::string s);

  std::string path_;
  size_t size_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;

 private:
  std::deque<std::string> strings_;  // stable addresses for KeepString
};

}  // namespace tandem
