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
#include "kernels/half.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {

bool HasInt8Tile(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ5_0 || type == TensorType::kQ4_0;
}

int Int8TileOffset(TensorType type) {
  switch (type) {
    case TensorType::kQ5_0:
      return 16;
    case TensorType::kQ4_0:
      return 8;
    default:
      return 0;
  }
}

namespace {

// Scale lanes of one pair of blocks: [d0 d0 d1 d1 d0 d0 d1 d1] (see int8_tile.h).
inline void PairLanes(float d0, float d1, float* lanes) {
  lanes[0] = lanes[1] = lanes[4] = lanes[5] = d0;
  lanes[2] = lanes[3] = lanes[6] = lanes[7] = d1;
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
    GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;

}  // namespace

float QuantizeBlockQ8_0(const float* x, int8_t* q) {
  return kUseAvx2Quantize ? QuantizeBlockQ8_0Avx2(x, q) : QuantizeBlockQ8_0Scalar(x, q);
}

namespace {

// Pair p of 32-blocks of a stored Q8_0/Q5_0/Q4_0 row as the tile takes it: the values
// (Q8_0 as int8, Q5_0/Q4_0 as unsigned bytes) and the two fp16 scales.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) inline void DecodeWeightPair(const void* w_row, int64_t p,
                                                                      __m256i* w0, __m256i* w1,
                                                                      uint16_t* d0, uint16_t* d1) {
  if constexpr (kType == TensorType::kQ8_0) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(w_row) + 2 * p;
    *w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs));
    *w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs));
    *d0 = b[0].d;
    *d1 = b[1].d;
  } else if constexpr (kType == TensorType::kQ5_0) {
    const BlockQ5_0* b = static_cast<const BlockQ5_0*>(w_row) + 2 * p;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    *w0 =
        _mm256_or_si256(NibblesToBytes(b[0].qs), _mm256_and_si256(BytesFromBits32(b[0].qh), bit4));
    *w1 =
        _mm256_or_si256(NibblesToBytes(b[1].qs), _mm256_and_si256(BytesFromBits32(b[1].qh), bit4));
    *d0 = b[0].d;
    *d1 = b[1].d;
  } else {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w_row) + 2 * p;
    *w0 = NibblesToBytes(b[0].qs);
    *w1 = NibblesToBytes(b[1].qs);
    *d0 = b[0].d;
    *d1 = b[1].d;
  }
}

// [d0 d0 d1 d1 d0 d0 d1 d1] from two fp16 scales: one conversion, one permute.
__attribute__((target("avx2,fma,f16c"))) inline __m256 PairScaleLanes(uint16_t d0, uint16_t d1) {
  const __m128 both =
      _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d0 | (static_cast<uint32_t>(d1) << 16))));
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(both),
                                  _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
}

// One pair of 32-blocks of one weight row against one token: int32 lanes
// [b0 b0 b1 b1 b0 b0 b1 b1], each the exact sum of 8 products (unsigned weights' offset
// taken back out by `corr`). The tile and DotTileRow both use it, so they agree bit for bit.
template <bool kSigned>
__attribute__((target("avx2,fma"))) inline __m256i PairSums(__m256i w0, __m256i w1, __m256i x0,
                                                            __m256i x1, const int32_t* corr) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i m0, m1;
  if constexpr (kSigned) {
    m0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
    m1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
  } else {
    m0 = _mm256_maddubs_epi16(w0, x0);
    m1 = _mm256_maddubs_epi16(w1, x1);
  }
  const __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
  if constexpr (kSigned) return h;
  return _mm256_sub_epi32(h, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr)));
}

template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) void PrepareTileWeightRowAvx2(const void* w_row,
                                                                       int64_t n_pairs, uint8_t* q,
                                                                       float* d_lanes) {
  for (int64_t p = 0; p < n_pairs; ++p, q += 64, d_lanes += 8) {
    __m256i w0, w1;
    uint16_t d0, d1;
    DecodeWeightPair<kType>(w_row, p, &w0, &w1, &d0, &d1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), w0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32), w1);
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
      default:
        break;
    }
  }
  const int64_t n = cols / 32;
  float d[2];
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case TensorType::kQ8_0: {
        const BlockQ8_0& b = static_cast<const BlockQ8_0*>(w_row)[i];
        std::memcpy(q + 32 * i, b.qs, 32);
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ5_0: {
        const BlockQ5_0& b = static_cast<const BlockQ5_0*>(w_row)[i];
        int8_t v[32];
        UnpackQ5_0(b, v);
        for (int j = 0; j < 32; ++j) q[32 * i + j] = static_cast<uint8_t>(v[j] + 16);
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ4_0: {
        const BlockQ4_0& b = static_cast<const BlockQ4_0*>(w_row)[i];
        for (int j = 0; j < 16; ++j) {
          q[32 * i + j] = b.qs[j] & 0x0F;
          q[32 * i + j + 16] = b.qs[j] >> 4;
        }
        d[i % 2] = Fp16ToFp32(b.d);
        break;
      }
      default:
        TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
    }
    if (i % 2 == 1) PairLanes(d[0], d[1], d_lanes + 8 * (i / 2));
  }
}

void PrepareTileActivationRow(const float* x, int64_t cols, int offset, int8_t* q, float* d_lanes,
                              int32_t* corr) {
  const int64_t n = cols / 32;
  float d[2];
  int32_t sums[2];
  for (int64_t i = 0; i < n; ++i) {
    const float amax = QuantizeBlockQ8_0(x + 32 * i, q + 32 * i);
    d[i % 2] = Fp16ToFp32(Fp32ToFp16(amax / 127.0f));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[32 * i + j];
    sums[i % 2] = sum;
    if (i % 2 == 1) {
      PairLanes(d[0], d[1], d_lanes + 8 * (i / 2));
      int32_t* c = corr + 8 * (i / 2);
      std::fill(c, c + 8, 0);
      c[0] = offset * sums[0];  // lane 0 belongs to the pair's first block, lane 2 to its second
      c[2] = offset * sums[1];
    }
  }
}

namespace {

void DotInt8Tile4x2Scalar(int offset, const TileOperand w[4], const TileOperand a[2],
                          int64_t n_pairs, float out[4][2]) {
  for (int r = 0; r < 4; ++r) {
    const uint8_t* wq = static_cast<const uint8_t*>(w[r].q);
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      float sum = 0;
      for (int64_t b = 0; b < 2 * n_pairs; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) {
          const int wv =
              offset == 0 ? static_cast<int8_t>(wq[32 * b + j]) : wq[32 * b + j] - offset;
          isum += wv * aq[32 * b + j];
        }
        const int64_t lane = 8 * (b / 2) + 2 * (b % 2);
        sum += w[r].d_lanes[lane] * a[t].d_lanes[lane] * static_cast<float>(isum);
      }
      out[r][t] = sum;
    }
  }
}

template <bool kSigned>
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
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + 64 * p));
        const __m256i w1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + 64 * p + 32));
        const __m256i h = PairSums<kSigned>(w0, w1, x0, x1, a[t].corr + 8 * p);
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

// DotTileRow's vector path: each pair of weight blocks decoded as PrepareTileWeightRow
// would, then exactly the tile's per-lane steps for one row and one token.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) float DotTileRowAvx2(const void* w_row,
                                                              const TileOperand& a,
                                                              int64_t n_pairs) {
  const int8_t* aq = static_cast<const int8_t*>(a.q);
  __m256 acc = _mm256_setzero_ps();
  // Decode streams the weights once from DRAM; the hardware prefetcher alone leaves one
  // core at ~80% of its read bandwidth (kernels_bench lm_head GEMV), so each pair also
  // asks for the line kPrefetchBytes ahead (past this row: the next rows of the matrix).
  using Block =
      std::conditional_t<kType == TensorType::kQ8_0, BlockQ8_0,
                         std::conditional_t<kType == TensorType::kQ5_0, BlockQ5_0, BlockQ4_0>>;
  constexpr int64_t kPairBytes = 2 * static_cast<int64_t>(sizeof(Block));
  constexpr int64_t kPrefetchBytes = 1536;
  const char* ahead = static_cast<const char*>(w_row) + kPrefetchBytes;
  for (int64_t p = 0; p < n_pairs; ++p) {
    _mm_prefetch(ahead + p * kPairBytes, _MM_HINT_T0);
    __m256i w0, w1;
    uint16_t d0, d1;
    DecodeWeightPair<kType>(w_row, p, &w0, &w1, &d0, &d1);
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p + 32));
    const __m256i h = PairSums<kType == TensorType::kQ8_0>(w0, w1, x0, x1, a.corr + 8 * p);
    const __m256 wd = PairScaleLanes(d0, d1);
    const __m256 scale = _mm256_mul_ps(wd, _mm256_loadu_ps(a.d_lanes + 8 * p));
    acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(h), acc);
  }
  return HorizontalSum(acc);
}

}  // namespace

float DotTileRow(TensorType type, const void* w_row, const TileOperand& a, int64_t n_pairs) {
  if (kUseAvx2Quantize) {
    switch (type) {
      case TensorType::kQ8_0:
        return DotTileRowAvx2<TensorType::kQ8_0>(w_row, a, n_pairs);
      case TensorType::kQ5_0:
        return DotTileRowAvx2<TensorType::kQ5_0>(w_row, a, n_pairs);
      case TensorType::kQ4_0:
        return DotTileRowAvx2<TensorType::kQ4_0>(w_row, a, n_pairs);
      default:
        TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
    }
  }
  // Scalar: decode the row and run the tile's scalar arithmetic for it.
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> d;
  q.resize(static_cast<size_t>(64 * n_pairs));
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
                    const TileOperand& a1, int64_t n_pairs, float out[4][2]) {
  const TileOperand a[2] = {a0, a1};
  if (!kUseAvx2Quantize) return DotInt8Tile4x2Scalar(offset, w, a, n_pairs, out);
  if (offset == 0) return DotInt8Tile4x2Avx2<true>(w, a, n_pairs, out);
  DotInt8Tile4x2Avx2<false>(w, a, n_pairs, out);
}

}  // namespace tandem
