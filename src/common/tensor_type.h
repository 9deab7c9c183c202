// GGML tensor element types as stored in GGUF files, and their block layout.
//
// Quantized types store `block_elems` values in `block_bytes` bytes; a row of n
// elements (n a multiple of block_elems) takes n / block_elems * block_bytes bytes.
// Thread safety: pure functions over constants.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem {

// Numeric values are GGML's `ggml_type` ids (the on-disk encoding), except the in-memory
// layouts from kFirstInMemoryType on, which no file holds.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  // Pairs of Q5_0 / Q4_0 blocks repacked at load for the int8 tile (kernels/int8_tile.h):
  // the same values and scales, 64 values per block.
  kQ4_0x2 = 0x10002,
  kQ5_0x2 = 0x10006,
  // Per-output-channel int8 weights (W8A8: compressed-tensors `int-quantized`, msmodelslim
  // W8A8 / W8A8_DYNAMIC), the stored I8 [out, in] tensor as it is: row r = cols int8 values,
  // contiguous, row_bytes = cols. The per-row scales (and offsets, activation parameters)
  // travel beside the data (kernels/matmul.h Int8RowParams).
  kI8Rows = 0x10018,
};

inline constexpr uint32_t kFirstInMemoryType = 0x10000;

struct TensorTypeTraits {
  std::string_view name;  // "Q8_0", "F16", ...
  int64_t block_elems;    // values per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
};

// Traits of a known file type id (a GGUF tensor's), or nullopt for an id Tandem does not
// know or an in-memory layout.
std::optional<TensorTypeTraits> GetTensorTypeTraits(uint32_t type_id);

// Preconditions: `type` is a known type (a file type or an in-memory layout).
TensorTypeTraits TraitsOf(TensorType type);

// Bytes taken by a row of `n_elems` values; nullopt if n_elems is not a multiple of the block.
std::optional<int64_t> RowBytes(TensorType type, int64_t n_elems);

}  // namespace tandem
