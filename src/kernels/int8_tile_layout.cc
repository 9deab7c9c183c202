// The int8 tile's layout (int8_tile.h): where a pair's values sit, and the weight and
// activation rows prepared in it. The kernels that read these rows are in
// int8_tile_scalar.cc, int8_tile_avx2.cc and int8_tile_avx512.cc.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/isa.h"
#include "kernels/q8_0_quantizer.h"

namespace tandem {

bool HasInt8Tile(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ5_0 || type == TensorType::kQ4_0 ||
         type == TensorType::kQ5_0x2 || type == TensorType::kQ4_0x2;
}

int TilePosition(int i) {
  const int block = i / 32, v = i % 32, group = v / 4;  // group: 4-value group of the block
  const int lane = group / 4, q = group % 4;            // 128-bit lane, group within it
  const int half = q / 2;                               // unpacklo (0) or unpackhi (1)
  return 32 * half + 16 * lane + 4 * (2 * (q % 2) + block) + v % 4;
}

int64_t TileWeightRowBytes(TensorType type, int64_t cols) {
  return type == TensorType::kQ8_0 ? 2 * cols : cols;
}

int Int8TileOffset(TensorType type) {
  switch (type) {
    case TensorType::kQ5_0:
    case TensorType::kQ5_0x2:
      return 16;
    case TensorType::kQ4_0:
    case TensorType::kQ4_0x2:
      return 8;
    default:
      return 0;
  }
}

namespace {

// Scale lanes of one pair of blocks: [d0 d1 d0 d1 d0 d1 d0 d1] (see int8_tile.h).
inline void PairLanes(float d0, float d1, float* lanes) {
  for (int j = 0; j < 8; j += 2) {
    lanes[j] = d0;
    lanes[j + 1] = d1;
  }
}

// The 64 values of a pair (natural order, block 0 then block 1) into the tile's order.
template <typename T>
void ScatterPair(const T* natural, T* tile) {
  for (int i = 0; i < 64; ++i) tile[TilePosition(i)] = natural[i];
}

template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) void PrepareTileWeightRowAvx2(const void* w_row,
                                                                       int64_t n_pairs, uint8_t* q,
                                                                       float* d_lanes) {
  constexpr bool kSigned = kType == TensorType::kQ8_0;
  for (int64_t p = 0; p < n_pairs; ++p, q += kSigned ? 128 : 64, d_lanes += 8) {
    __m256i w0, w1;
    uint16_t d0, d1;
    DecodeWeightPair<kType>(w_row, p, &w0, &w1, &d0, &d1);
    if constexpr (!kStoredInTileOrder<kType>) ToTileOrder(&w0, &w1);
    if constexpr (kSigned) {  // magnitudes first, then the values (for their signs)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_sign_epi8(w0, w0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32), _mm256_sign_epi8(w1, w1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64), w0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 96), w1);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), w0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32), w1);
    }
    _mm256_storeu_ps(d_lanes, PairScaleLanes(d0, d1));
  }
}

const bool kUseAvx2Prepare = KernelIsaLevel() >= IsaLevel::kAvx2;

}  // namespace

void PrepareTileWeightRow(TensorType type, const void* w_row, int64_t cols, uint8_t* q,
                          float* d_lanes) {
  if (kUseAvx2Prepare) {
    switch (type) {
      case TensorType::kQ8_0:
        return PrepareTileWeightRowAvx2<TensorType::kQ8_0>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ5_0:
        return PrepareTileWeightRowAvx2<TensorType::kQ5_0>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ4_0:
        return PrepareTileWeightRowAvx2<TensorType::kQ4_0>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ5_0x2:
        return PrepareTileWeightRowAvx2<TensorType::kQ5_0x2>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ4_0x2:
        return PrepareTileWeightRowAvx2<TensorType::kQ4_0x2>(w_row, cols / 64, q, d_lanes);
      default:
        break;
    }
  }
  if (type == TensorType::kQ5_0x2 || type == TensorType::kQ4_0x2) {
    for (int64_t p = 0; p < cols / 64; ++p) {
      float d[2];
      UnpackRepackedPair(type, w_row, p, q + 64 * p, d);
      PairLanes(d[0], d[1], d_lanes + 8 * p);
    }
    return;
  }
  uint8_t natural[64];
  float d[2];
  for (int64_t i = 0; i < cols / 32; ++i) {
    uint8_t* v = natural + 32 * (i % 2);
    switch (type) {
      case TensorType::kQ8_0: {
        const BlockQ8_0& b = static_cast<const BlockQ8_0*>(w_row)[i];
        std::memcpy(v, b.qs, 32);
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ5_0: {
        const BlockQ5_0& b = static_cast<const BlockQ5_0*>(w_row)[i];
        int8_t values[32];
        UnpackQ5_0(b, values);
        for (int j = 0; j < 32; ++j) v[j] = static_cast<uint8_t>(values[j] + 16);
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ4_0: {
        const BlockQ4_0& b = static_cast<const BlockQ4_0*>(w_row)[i];
        for (int j = 0; j < 16; ++j) {
          v[j] = b.qs[j] & 0x0F;
          v[j + 16] = b.qs[j] >> 4;
        }
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      default:
        TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
    }
    if (i % 2 == 1) {
      if (type == TensorType::kQ8_0) {
        uint8_t* out = q + 128 * (i / 2);
        ScatterPair(natural, out + 64);
        for (int j = 0; j < 64; ++j) {
          const int v = static_cast<int8_t>(out[64 + j]);
          out[j] = static_cast<uint8_t>(v < 0 ? -v : v);  // |-128| = 128, as vpsignb leaves it
        }
      } else {
        ScatterPair(natural, q + 64 * (i / 2));
      }
      PairLanes(d[0], d[1], d_lanes + 8 * (i / 2));
    }
  }
}

void PrepareTileActivationRow(const float* x, int64_t cols, int offset, int8_t* q, float* d_lanes,
                              int32_t* corr) {
  int8_t natural[64];
  float d[2];
  int32_t sums[2];
  for (int64_t i = 0; i < cols / 32; ++i) {
    int8_t* v = natural + 32 * (i % 2);
    const float amax = QuantizeBlockQ8_0(x + 32 * i, v);
    d[i % 2] = Fp16ToFp32(Fp32ToFp16(amax / 127.0f));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += v[j];
    sums[i % 2] = sum;
    if (i % 2 == 1) {
      ScatterPair(natural, q + 64 * (i / 2));
      PairLanes(d[0], d[1], d_lanes + 8 * (i / 2));
      int32_t* c = corr + 8 * (i / 2);
      std::fill(c, c + 8, 0);
      // Lane 0 holds products of the pair's first block, lane 1 of its second.
      c[0] = offset * sums[0];
      c[1] = offset * sums[1];
    }
  }
}

}  // namespace tandem
