#include "kernels/int8_tile.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/isa.h"
#include "kernels/half.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/quant_dot_internal.h"
#include "kernels/row_runs.h"

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

// Bit of a Q5_0x2 pair's `qh` that holds bit 4 of tile byte i (0..63; see BlockQ5_0x2).
inline int Q5_0x2HighBit(int i) {
  const int j = i % 32, k = j / 8, b = j % 8;
  return i < 32 ? 8 * b + 4 + k : 8 * b + k;
}

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

// QuantizeActivationsQ8_0's arithmetic, 32 values at a time: amax, id = 127 / amax,
// q = round-half-even(x * id) (cvtps_epi32 under the default rounding mode).
__attribute__((target("avx2,fma,f16c"))) float QuantizeBlockQ8_0Avx2(const float* x, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    m = _mm256_max_ps(m, _mm256_and_ps(v[k], abs_mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  // packs work per 128-bit lane; the permute puts the 8 dwords back in order.
  const __m256i w01 = _mm256_packs_epi32(i[0], i[1]), w23 = _mm256_packs_epi32(i[2], i[3]);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return amax;
}

float QuantizeBlockQ8_0Scalar(const float* x, int8_t* q) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  return amax;
}

const bool kUseAvx2Quantize =
    KernelIsaLevel() >= IsaLevel::kAvx2;

}  // namespace

float QuantizeBlockQ8_0(const float* x, int8_t* q) {
  return kUseAvx2Quantize ? QuantizeBlockQ8_0Avx2(x, q) : QuantizeBlockQ8_0Scalar(x, q);
}

namespace {

// One pair of 32-blocks (tile order) of one weight row against one token: int32 lane j
// is the exact sum of 8 products of block j % 2 (unsigned weights' offset taken back out
// by `corr`). The tile and DotTileRow both use it, so they agree bit for bit. For
// unsigned weights (<= 31) two products-of-pairs fit int16 (4 * 31 * 127 < 2^15), so the
// halves are added before `vpmaddwd`; signed ones (up to 2 * 128 * 127 each) are not.
// No int16 sum saturates, so vpdpbusd gives the same integers.
template <bool kSigned, VnniForm kForm = VnniForm::kNone>
__attribute__((target("avx2,fma"))) inline __m256i PairSums(__m256i w0, __m256i w1, __m256i x0,
                                                            __m256i x1, const int32_t* corr) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kSigned) {
    if constexpr (kForm != VnniForm::kNone) {
      const __m256i h = DpBusd<kForm>(_mm256_setzero_si256(), _mm256_sign_epi8(w0, w0),
                                      _mm256_sign_epi8(x0, w0));
      return DpBusd<kForm>(h, _mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    }
    const __m256i m0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
    const __m256i m1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    return _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
  } else {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr));
    if constexpr (kForm != VnniForm::kNone) {
      return _mm256_sub_epi32(
          DpBusd<kForm>(DpBusd<kForm>(_mm256_setzero_si256(), w0, x0), w1, x1), c);
    }
    const __m256i m = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1));
    return _mm256_sub_epi32(_mm256_madd_epi16(m, ones), c);
  }
}

// PairSums<true> with the weights' magnitudes |w| given (the tile stores them), so only
// the activations' sign flip is left per token. Same integers.
template <VnniForm kForm = VnniForm::kNone>
__attribute__((target("avx2,fma"))) inline __m256i SignedPairSums(__m256i abs0, __m256i abs1,
                                                                  __m256i w0, __m256i w1,
                                                                  __m256i x0, __m256i x1) {
  if constexpr (kForm != VnniForm::kNone) {
    return DpBusd<kForm>(DpBusd<kForm>(_mm256_setzero_si256(), abs0, _mm256_sign_epi8(x0, w0)),
                         abs1, _mm256_sign_epi8(x1, w1));
  }
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i m0 = _mm256_maddubs_epi16(abs0, _mm256_sign_epi8(x0, w0));
  const __m256i m1 = _mm256_maddubs_epi16(abs1, _mm256_sign_epi8(x1, w1));
  return _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
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

}  // namespace

void PrepareTileWeightRow(TensorType type, const void* w_row, int64_t cols, uint8_t* q,
                          float* d_lanes) {
  if (kUseAvx2Quantize) {
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

namespace {

// The vector path's arithmetic lane by lane (same integers, same fused multiply-adds,
// same horizontal sum), so the two paths give the same bits.
float TileLanesSum(const float acc[8]) {
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = acc[j] + acc[j + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
}

}  // namespace

void DotInt8Tile4x2Scalar(int offset, const TileOperand w[4], const TileOperand a[2],
                          int64_t n_pairs, float out[4][2]) {
  for (int r = 0; r < 4; ++r) {
    const uint8_t* wq = static_cast<const uint8_t*>(w[r].q);
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      float acc[8] = {};
      for (int64_t p = 0; p < n_pairs; ++p) {
        for (int j = 0; j < 8; ++j) {
          int32_t isum = 0;
          for (int half = 0; half < 2; ++half) {
            for (int k = 0; k < 4; ++k) {
              const int64_t pos = 64 * p + 32 * half + 4 * j + k;
              // Unsigned weights as stored; their offset leaves through the corrections.
              const int wv = offset == 0 ? static_cast<int8_t>(wq[pos + 64 * p + 64]) : wq[pos];
              isum += wv * aq[pos];
            }
          }
          const int64_t lane = 8 * p + j;
          if (offset != 0) isum -= a[t].corr[lane];
          acc[j] =
              std::fma(w[r].d_lanes[lane] * a[t].d_lanes[lane], static_cast<float>(isum), acc[j]);
        }
      }
      out[r][t] = TileLanesSum(acc);
    }
  }
}

namespace {

template <bool kSigned, VnniForm kForm>
__attribute__((target("avx2,fma"))) void DotInt8Tile4x2Avx2(const TileOperand w[4],
                                                            const TileOperand a[2], int64_t n_pairs,
                                                            float out[4][2]) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const uint8_t* wq[4];
  const float* wd[4];
  for (int r = 0; r < 4; ++r) {
    wq[r] = static_cast<const uint8_t*>(w[r].q);
    wd[r] = w[r].d_lanes;
  }
  for (int64_t p = 0; p < n_pairs; ++p) {
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q) + 64 * p;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32));
      const __m256 da = _mm256_loadu_ps(a[t].d_lanes + 8 * p);
      for (int r = 0; r < 4; ++r) {
        const uint8_t* pair = wq[r] + (kSigned ? 128 : 64) * p;
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32));
        __m256i h;
        if constexpr (kSigned) {
          h = SignedPairSums<kForm>(
              w0, w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 64)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 96)), x0, x1);
        } else {
          h = PairSums<false, kForm>(w0, w1, x0, x1, a[t].corr + 8 * p);
        }
        const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(wd[r] + 8 * p), da);
        acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(h), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    out[r][0] = HorizontalSum(acc[r][0]);
    out[r][1] = HorizontalSum(acc[r][1]);
  }
}

// DotTileRow's vector path for kGroup tokens at once: each pair of weight blocks is decoded
// as PrepareTileWeightRow would, once for all of them, then every token's lanes take
// exactly the tile's per-lane steps, in the same order, so a token's result does not
// depend on the group it is in. Decode streams the weights once from DRAM; the hardware
// prefetcher alone leaves one core at ~80% of its read bandwidth (kernels_bench lm_head
// GEMV), so each pair also asks for the line kPrefetchBytes ahead (past this row: the
// next rows of the matrix).
template <TensorType kType, int kGroup, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline void DotTileRowGroupAvx2(const void* w_row,
                                                                        const TileOperand* a,
                                                                        int64_t n_pairs, float* out) {
  __m256 acc[kGroup];
  for (int t = 0; t < kGroup; ++t) acc[t] = _mm256_setzero_ps();
  constexpr int64_t kPairBytes = kStoredPairBytes<kType>;
  constexpr int64_t kPrefetchBytes = 1536;
  const char* ahead = static_cast<const char*>(w_row) + kPrefetchBytes;
  for (int64_t p = 0; p < n_pairs; ++p) {
    _mm_prefetch(ahead + p * kPairBytes, _MM_HINT_T0);
    __m256i w0, w1;
    uint16_t d0, d1;
    DecodeWeightPair<kType>(w_row, p, &w0, &w1, &d0, &d1);
    if constexpr (!kStoredInTileOrder<kType>) ToTileOrder(&w0, &w1);
    const __m256 wd = PairScaleLanes(d0, d1);
    for (int t = 0; t < kGroup; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p + 32));
      const __m256i h =
          PairSums<kType == TensorType::kQ8_0, kForm>(w0, w1, x0, x1, a[t].corr + 8 * p);
      const __m256 scale = _mm256_mul_ps(wd, _mm256_loadu_ps(a[t].d_lanes + 8 * p));
      acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(h), acc[t]);
    }
  }
  for (int t = 0; t < kGroup; ++t) out[t] = HorizontalSum(acc[t]);
}

template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline float DotTileRowAvx2(const void* w_row,
                                                                     const TileOperand& a,
                                                                     int64_t n_pairs) {
  float out;
  DotTileRowGroupAvx2<kType, 1, kForm>(w_row, &a, n_pairs, &out);
  return out;
}

// Rows outer, tokens inner: a row read from DRAM once serves every token (from L1),
// decoded once per group of up to four tokens.
template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) void DotTileRowsAvx2(const uint8_t* w, int64_t row_bytes,
                                                              int64_t rows, const TileOperand* a,
                                                              int n_tokens, int64_t n_pairs,
                                                              float* y, int64_t y_stride) {
  ForEachRowInRuns(n_tokens, 0, rows, [&](int64_t r) {  // interleaved runs (row_runs.h)
    const uint8_t* row = w + r * row_bytes;
    float out[4];
    int t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      DotTileRowGroupAvx2<kType, 4, kForm>(row, a + t, n_pairs, out);
      for (int k = 0; k < 4; ++k) y[(t + k) * y_stride + r] = out[k];
    }
    switch (n_tokens - t) {
      case 3:
        DotTileRowGroupAvx2<kType, 3, kForm>(row, a + t, n_pairs, out);
        break;
      case 2:
        DotTileRowGroupAvx2<kType, 2, kForm>(row, a + t, n_pairs, out);
        break;
      case 1:
        out[0] = DotTileRowAvx2<kType, kForm>(row, a[t], n_pairs);
        break;
      default:
        break;
    }
    for (int k = 0; t + k < n_tokens; ++k) y[(t + k) * y_stride + r] = out[k];
  });
}

}  // namespace

const char* Int8KernelName(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kScalar:
      return "scalar";
    case Int8Kernel::kAvx2:
      return "avx2";
    case Int8Kernel::kAvxVnni:
      return "avx-vnni";
    case Int8Kernel::kAvx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

Int8Kernel ChosenInt8Kernel() {
  static const Int8Kernel kernel = [] {
    switch (KernelIsaLevel()) {
      case IsaLevel::kScalar:
        return Int8Kernel::kScalar;
      case IsaLevel::kAvx2:
        return KernelUsesVnni() ? Int8Kernel::kAvxVnni : Int8Kernel::kAvx2;
      default:
        return Int8Kernel::kAvx512Vnni;
    }
  }();
  return kernel;
}

std::vector<Int8Kernel> RunnableInt8Kernels() {
  std::vector<Int8Kernel> kernels{Int8Kernel::kScalar};
  if (CpuIsaLevel() >= IsaLevel::kAvx2) kernels.push_back(Int8Kernel::kAvx2);
  if (CpuIsaLevel() >= IsaLevel::kAvx2 && GetCpuFeatures().avx_vnni)
    kernels.push_back(Int8Kernel::kAvxVnni);
  if (CpuIsaLevel() >= IsaLevel::kAvx512) kernels.push_back(Int8Kernel::kAvx512Vnni);
  return kernels;
}

void DotTileRows(TensorType type, const void* w, int64_t row_bytes, int64_t rows,
                 const TileOperand* a, int n_tokens, int64_t n_pairs, float* y, int64_t y_stride,
                 Int8Kernel kernel) {
  const uint8_t* base = static_cast<const uint8_t*>(w);
  if (kernel == Int8Kernel::kScalar) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < n_tokens; ++t) {
        y[t * y_stride + r] = DotTileRow(type, base + r * row_bytes, a[t], n_pairs, kernel);
      }
    }
    return;
  }
  WithTileType(type, [&](auto t) {
    constexpr TensorType kType = decltype(t)::value;
    if (n_tokens == 1) {  // decode: the rows in interleaved runs (row_runs.h)
      ForEachRowInRuns(1, 0, rows, [&](int64_t r) {
        const uint8_t* row = base + r * row_bytes;
        switch (kernel) {
          case Int8Kernel::kAvx512Vnni:  // the 256-bit path with EVEX vpdpbusd (half a zmm would idle)
            y[r] = DotTileRowAvx2<kType, VnniForm::kEvex>(row, a[0], n_pairs);
            break;
          case Int8Kernel::kAvxVnni:
            y[r] = DotTileRowAvx2<kType, VnniForm::kVex>(row, a[0], n_pairs);
            break;
          default:
            y[r] = DotTileRowAvx2<kType, VnniForm::kNone>(row, a[0], n_pairs);
        }
      });
      return;
    }
    switch (kernel) {
      case Int8Kernel::kAvx512Vnni:
        return DotTileRowsAvx512(type, base, row_bytes, rows, a, n_tokens, n_pairs, y, y_stride);
      case Int8Kernel::kAvxVnni:
        return DotTileRowsAvx2<kType, VnniForm::kVex>(base, row_bytes, rows, a, n_tokens, n_pairs,
                                                       y, y_stride);
      default:
        return DotTileRowsAvx2<kType, VnniForm::kNone>(base, row_bytes, rows, a, n_tokens, n_pairs,
                                                        y, y_stride);
    }
  });
}

float DotTileRow(TensorType type, const void* w_row, const TileOperand& a, int64_t n_pairs,
                 Int8Kernel kernel) {
  if (kernel != Int8Kernel::kScalar) {
    return WithTileType(type, [&](auto t) {
      constexpr TensorType kType = decltype(t)::value;
      switch (kernel) {
        case Int8Kernel::kAvx512Vnni:
          return DotTileRowAvx2<kType, VnniForm::kEvex>(w_row, a, n_pairs);
        case Int8Kernel::kAvxVnni:
          return DotTileRowAvx2<kType, VnniForm::kVex>(w_row, a, n_pairs);
        default:
          return DotTileRowAvx2<kType, VnniForm::kNone>(w_row, a, n_pairs);
      }
    });
  }
  // Scalar: decode the row and run the tile's scalar arithmetic for it.
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> d;
  q.resize(static_cast<size_t>(TileWeightRowBytes(type, 64 * n_pairs)));
  d.resize(static_cast<size_t>(8 * n_pairs));
  PrepareTileWeightRow(type, w_row, 64 * n_pairs, q.data(), d.data());
  const TileOperand w[4] = {{q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr}};
  const TileOperand act[2] = {a, a};
  float out[4][2];
  DotInt8Tile4x2Scalar(Int8TileOffset(type), w, act, n_pairs, out);
  return out[0][0];
}

void DotInt8Tile4x2(int offset, const TileOperand w[4], const TileOperand& a0,
                    const TileOperand& a1, int64_t n_pairs, float out[4][2], Int8Kernel kernel) {
  const TileOperand a[2] = {a0, a1};
  const bool is_signed = offset == 0;
  switch (kernel) {
    case Int8Kernel::kScalar:
      return DotInt8Tile4x2Scalar(offset, w, a, n_pairs, out);
    case Int8Kernel::kAvx2:
      return is_signed ? DotInt8Tile4x2Avx2<true, VnniForm::kNone>(w, a, n_pairs, out)
                       : DotInt8Tile4x2Avx2<false, VnniForm::kNone>(w, a, n_pairs, out);
    case Int8Kernel::kAvxVnni:
      return is_signed ? DotInt8Tile4x2Avx2<true, VnniForm::kVex>(w, a, n_pairs, out)
                       : DotInt8Tile4x2Avx2<false, VnniForm::kVex>(w, a, n_pairs, out);
    case Int8Kernel::kAvx512Vnni:
      return is_signed ? DotInt8Tile4x2Avx2<true, VnniForm::kEvex>(w, a, n_pairs, out)
                       : DotInt8Tile4x2Avx2<false, VnniForm::kEvex>(w, a, n_pairs, out);
  }
}

void DotInt8Tile4x4(int offset, const TileOperand w[4], const TileOperand a[4], int64_t n_pairs,
                    float out[4][4], Int8Kernel kernel) {
  if (kernel == Int8Kernel::kAvx512Vnni) return DotInt8Tile4x4Avx512(offset, w, a, n_pairs, out);
  for (int h = 0; h < 2; ++h) {
    float half[4][2];
    DotInt8Tile4x2(offset, w, a[2 * h], a[2 * h + 1], n_pairs, half, kernel);
    for (int r = 0; r < 4; ++r) {
      out[r][2 * h] = half[r][0];
      out[r][2 * h + 1] = half[r][1];
    }
  }
}

}  // namespace tandem
