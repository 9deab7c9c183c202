#include "common/tensor_type.h"

namespace tandem {

namespace {

std::optional<TensorTypeTraits> AnyTypeTraits(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return TensorTypeTraits{"F32", 1, 4};
    case TensorType::kF16:
      return TensorTypeTraits{"F16", 1, 2};
    case TensorType::kBF16:
      return TensorTypeTraits{"BF16", 1, 2};
    case TensorType::kF64:
      return TensorTypeTraits{"F64", 1, 8};
    case TensorType::kI8:
      return TensorTypeTraits{"I8", 1, 1};
    case TensorType::kI16:
      return TensorTypeTraits{"I16", 1, 2};
    case TensorType::kI32:
      return TensorTypeTraits{"I32", 1, 4};
    case TensorType::kI64:
      return TensorTypeTraits{"I64", 1, 8};
    case TensorType::kQ4_0:
      return TensorTypeTraits{"Q4_0", 32, 18};
    case TensorType::kQ4_1:
      return TensorTypeTraits{"Q4_1", 32, 20};
    case TensorType::kQ5_0:
      return TensorTypeTraits{"Q5_0", 32, 22};
    case TensorType::kQ5_1:
      return TensorTypeTraits{"Q5_1", 32, 24};
    case TensorType::kQ8_0:
      return TensorTypeTraits{"Q8_0", 32, 34};
    case TensorType::kQ8_1:
      return TensorTypeTraits{"Q8_1", 32, 36};
    case TensorType::kQ2_K:
      return TensorTypeTraits{"Q2_K", 256, 84};
    case TensorType::kQ3_K:
      return TensorTypeTraits{"Q3_K", 256, 110};
    case TensorType::kQ4_K:
      return TensorTypeTraits{"Q4_K", 256, 144};
    case TensorType::kQ5_K:
      return TensorTypeTraits{"Q5_K", 256, 176};
    case TensorType::kQ6_K:
      return TensorTypeTraits{"Q6_K", 256, 210};
    case TensorType::kQ8_K:
      return TensorTypeTraits{"Q8_K", 256, 292};
    case TensorType::kQ4_0x2:
      return TensorTypeTraits{"Q4_0x2", 64, 36};
    case TensorType::kQ5_0x2:
      return TensorTypeTraits{"Q5_0x2", 64, 44};
    case TensorType::kI8Rows:
      return TensorTypeTraits{"I8_ROWS", 1, 1};
  }
  return std::nullopt;
}

}  // namespace

std::optional<TensorTypeTraits> GetTensorTypeTraits(uint32_t type_id) {
  if (type_id >= kFirstInMemoryType) return std::nullopt;
  return AnyTypeTraits(static_cast<TensorType>(type_id));
}

TensorTypeTraits TraitsOf(TensorType type) { return *AnyTypeTraits(type); }

std::optional<int64_t> RowBytes(TensorType type, int64_t n_elems) {
  auto traits = AnyTypeTraits(type);
  if (!traits || n_elems < 0 || n_elems % traits->block_elems != 0) return std::nullopt;
  return n_elems / traits->block_elems * traits->block_bytes;
}

}  // namespace tandem
