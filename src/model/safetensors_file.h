// SafetensorsFile: a validating reader of one Hugging Face `.safetensors` file over mmap,
// and SafetensorsIndex, the shard map of a sharded checkpoint (`*.safetensors.index.json`).
//
// Format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON (it may end in spaces), then the data. The JSON is an object: each key but
// `__metadata__` names a tensor `{"dtype": D, "shape": [..], "data_offsets": [begin, end]}`
// with offsets from the start of the data (file position 8 + N); `__metadata__`, if
// present, is an object of strings. Checked as the format defines it (and as its
// reference reader checks): N at most 100 MB and inside the file, the JSON an object,
// every entry of that form with a known dtype, non-negative dims, end - begin = the
// element count times the dtype's size, the tensors' byte ranges (sorted by begin)
// contiguous from 0 with no hole or overlap, and the last one ending at the file's end.
// Every failure is InvalidArgument or DataLoss naming the file and the tensor or key.
//
// Ownership: the file owns its mapping; tensor data pointers live as long as it.
// Thread safety: immutable after Open; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tandem {

// The dtypes a safetensors header may name (the format's list).
enum class SafetensorsDtype {
  kBool, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64,
};

// "F32" -> kF32 etc.; false for a name the format does not define.
bool ParseSafetensorsDtype(std::string_view name, SafetensorsDtype* dtype);
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
int SafetensorsDtypeSize(SafetensorsDtype dtype);  // bytes per element

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;     // outermost first (row-major, as PyTorch)
  uint64_t begin = 0;             // data_offsets, from the start of the data
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // [end - begin] bytes in the mapping
  int64_t num_elements = 1;
  uint64_t size_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // The header is limited to this many bytes (the format's reference limit).
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and validates `path`. NotFound if it does not exist.
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Validates a caller-owned buffer that must outlive the returned object.
  static StatusOr<std::unique_ptr<SafetensorsFile>> FromBuffer(const uint8_t* data, size_t size);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Tensors in header order of their data (by begin offset).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* FindTensor(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A sharded checkpoint's index: {"metadata": {"total_size": N, ...}, "weight_map":
// {tensor: file}} (any `*.safetensors.index.json`; msmodelslim names its own
// `quant_model_weight_w8a8_dynamic.safetensors.index.json`).
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  int64_t total_size = -1;                        // metadata.total_size (-1 = absent)
  std::vector<std::string> shards() const;        // the distinct files, sorted
};

// Parses an index's JSON text. InvalidArgument naming `source` and the key for JSON
// that is not of that form, an empty weight_map, a file name that is not a plain name
// in the same folder (a path separator or ".." would leave the checkpoint directory).
StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text, const std::string& source);

}  // namespace tandem
