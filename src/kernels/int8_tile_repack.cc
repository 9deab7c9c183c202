// Load-time repacking of Q5_0 / Q4_0 rows into the tile-ordered Q5_0x2 / Q4_0x2 layouts
// (int8_tile.h, BlockQ5_0x2 in dequant.h), and reading them back.
#include <cstring>

#include "common/logging.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"
#include "kernels/int8_tile_internal.h"

namespace tandem {

namespace {

// Bit of a Q5_0x2 pair's `qh` that holds bit 4 of tile byte i (0..63; see BlockQ5_0x2).
inline int Q5_0x2HighBit(int i) {
  const int j = i % 32, k = j / 8, b = j % 8;
  return i < 32 ? 8 * b + 4 + k : 8 * b + k;
}

}  // namespace

// Pair p of a Q5_0x2 / Q4_0x2 row: its 64 unsigned values in tile order and two scales.
void UnpackRepackedPair(TensorType type, const void* row, int64_t p, uint8_t tile[64], float d[2]) {
  uint8_t qs[32];
  uint64_t qh = 0;
  if (type == TensorType::kQ5_0x2) {
    BlockQ5_0x2 b;
    std::memcpy(&b, static_cast<const BlockQ5_0x2*>(row) + p, sizeof(b));
    std::memcpy(&qh, b.qh, sizeof(qh));
    std::memcpy(qs, b.qs, sizeof(qs));
    for (int j = 0; j < 2; ++j) d[j] = Fp16ToFp32(b.d[j]);
  } else {
    BlockQ4_0x2 b;
    std::memcpy(&b, static_cast<const BlockQ4_0x2*>(row) + p, sizeof(b));
    std::memcpy(qs, b.qs, sizeof(qs));
    for (int j = 0; j < 2; ++j) d[j] = Fp16ToFp32(b.d[j]);
  }
  for (int j = 0; j < 32; ++j) {
    tile[j] = qs[j] & 0x0F;
    tile[32 + j] = qs[j] >> 4;
  }
  if (type == TensorType::kQ5_0x2) {
    for (int i = 0; i < 64; ++i) tile[i] |= ((qh >> Q5_0x2HighBit(i)) & 1u) << 4;
  }
}

TensorType TileRepackedType(TensorType type) {
  switch (type) {
    case TensorType::kQ5_0:
      return TensorType::kQ5_0x2;
    case TensorType::kQ4_0:
      return TensorType::kQ4_0x2;
    default:
      return type;
  }
}

void RepackRowForTile(TensorType type, const void* src, int64_t cols, void* dst) {
  const TensorType out_type = TileRepackedType(type);
  TANDEM_CHECK(out_type != type && cols % 64 == 0)
      << "no tile repacking of " << TraitsOf(type).name << " rows of " << cols << " values";
  uint8_t tile[128];  // TileWeightRowBytes(type, 64) <= 128
  float unused[8];
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  for (int64_t p = 0; p < cols / 64; ++p) {
    // The tile-order unsigned values, as the tile takes them from the stored blocks.
    PrepareTileWeightRow(type, static_cast<const uint8_t*>(src) + 2 * p * block_bytes, 64, tile,
                         unused);
    Fp16Bits d[2];
    std::memcpy(&d[0], static_cast<const uint8_t*>(src) + 2 * p * block_bytes, sizeof(Fp16Bits));
    std::memcpy(&d[1], static_cast<const uint8_t*>(src) + (2 * p + 1) * block_bytes,
                sizeof(Fp16Bits));
    uint8_t qs[32];
    for (int j = 0; j < 32; ++j) {
      qs[j] = static_cast<uint8_t>((tile[j] & 0x0F) | (tile[32 + j] & 0x0F) << 4);
    }
    if (out_type == TensorType::kQ5_0x2) {
      BlockQ5_0x2 b;
      std::memcpy(b.d, d, sizeof(d));
      uint64_t qh = 0;
      for (int i = 0; i < 64; ++i) qh |= static_cast<uint64_t>(tile[i] >> 4) << Q5_0x2HighBit(i);
      std::memcpy(b.qh, &qh, sizeof(qh));
      std::memcpy(b.qs, qs, sizeof(qs));
      std::memcpy(static_cast<BlockQ5_0x2*>(dst) + p, &b, sizeof(b));
    } else {
      BlockQ4_0x2 b;
      std::memcpy(b.d, d, sizeof(d));
      std::memcpy(b.qs, qs, sizeof(qs));
      std::memcpy(static_cast<BlockQ4_0x2*>(dst) + p, &b, sizeof(b));
    }
  }
}

void DequantizeRepackedRow(TensorType type, const void* src, float* dst, int64_t cols) {
  TANDEM_CHECK((type == TensorType::kQ5_0x2 || type == TensorType::kQ4_0x2) && cols % 64 == 0);
  const int offset = Int8TileOffset(type);
  uint8_t tile[64];
  float d[2];
  for (int64_t p = 0; p < cols / 64; ++p, dst += 64) {
    UnpackRepackedPair(type, src, p, tile, d);
    for (int i = 0; i < 64; ++i) {
      dst[i] = static_cast<float>(tile[TilePosition(i)] - offset) * d[i / 32];
    }
  }
}

}  // namespace tandem
