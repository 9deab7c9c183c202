#include "kernels/quant_dot.h"

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
namespace {

// Signed 5-bit / 4-bit / 8-bit weight values of one 32-value block.
void UnpackQ4_0(const BlockQ4_0& b, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 0x0F) - 8);
    q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
}

void UnpackQ5_0(const BlockQ5_0& b, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
    q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
  }
}

template <typename Block, typename Unpack>
float DotScalar(const void* w_row, const void* a_row, int64_t n_blocks, Unpack unpack) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
  float sum = 0;
  int8_t q[32];
  for (int64_t i = 0; i < n_blocks; ++i) {
    unpack(w[i], q);
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += q[j] * a[i].qs[j];
    sum += Fp16ToFp32(w[i].d) * Fp16ToFp32(a[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// ---- AVX2 ----

__attribute__((target("avx2,fma,f16c"))) inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Byte j of the result is 0xFF where bit j of x is set, else 0x00.
__attribute__((target("avx2"))) inline __m256i BytesFromBits32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                            0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuffle);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles first (values 0..15), then high.
__attribute__((target("avx2"))) inline __m256i NibblesToBytes(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Sum of the 32 products of signed bytes, as 8 int32 lanes converted to float.
__attribute__((target("avx2"))) inline __m256 DotBytes(__m256i w, __m256i a) {
  const __m256i abs_w = _mm256_sign_epi8(w, w);
  const __m256i signed_a = _mm256_sign_epi8(a, w);
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, signed_a);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c"))) float DotQ8_0Avx2(const void* w_row, const void* a_row, int64_t n) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs));
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
    const __m256 d = _mm256_set1_ps(HalfToFloat(w[i].d) * HalfToFloat(a[i].d));
    acc = _mm256_fmadd_ps(d, DotBytes(qw, qa), acc);
  }
  return HorizontalSum(acc);
}

__attribute__((target("avx2,fma,f16c"))) float DotQ5_0Avx2(const void* w_row, const void* a_row, int64_t n) {
  const BlockQ5_0* w = static_cast<const BlockQ5_0*>(w_row);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    __m256i qw = NibblesToBytes(w[i].qs);
    // (nibble | bit4 << 4) - 16: where bit 4 is clear the value is nibble - 16, i.e.
    // the nibble with the top four bits set; where set, the nibble itself.
    const __m256i high_clear = _mm256_andnot_si256(BytesFromBits32(w[i].qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    qw = _mm256_or_si256(qw, high_clear);
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
    const __m256 d = _mm256_set1_ps(HalfToFloat(w[i].d) * HalfToFloat(a[i].d));
    acc = _mm256_fmadd_ps(d, DotBytes(qw, qa), acc);
  }
  return HorizontalSum(acc);
}

__attribute__((target("avx2,fma,f16c"))) float DotQ4_0Avx2(const void* w_row, const void* a_row, int64_t n) {
  const BlockQ4_0* w = static_cast<const BlockQ4_0*>(w_row);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const __m256i qw = _mm256_sub_epi8(NibblesToBytes(w[i].qs), _mm256_set1_epi8(8));
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
    const __m256 d = _mm256_set1_ps(HalfToFloat(w[i].d) * HalfToFloat(a[i].d));
    acc = _mm256_fmadd_ps(d, DotBytes(qw, qa), acc);
  }
  return HorizontalSum(acc);
}


// ---- K-quants x Q8_K ----

// Q4_K values 0..15 of one super-block in natural order.
inline void UnpackQ4_K(const BlockQ4_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 0xF;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}

// Q6_K values 0..63 (before the -32 offset) of one super-block in natural order.
inline void UnpackQ6_K(const BlockQ6_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
      out[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      out[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      out[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    }
  }
}

float DotQ4_KReference(const void* w_row, const void* a_row, int64_t n_blocks) {
  const BlockQ4_K* w = static_cast<const BlockQ4_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0;
  uint8_t q[256];
  for (int64_t i = 0; i < n_blocks; ++i) {
    UnpackQ4_K(w[i], q);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, w[i].scales, &sc, &m);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += q[32 * j + l] * a[i].qs[32 * j + l];
      sumi += sc * dot;
      summ += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    sum += a[i].d * Fp16ToFp32(w[i].d) * static_cast<float>(sumi) -
           a[i].d * Fp16ToFp32(w[i].dmin) * static_cast<float>(summ);
  }
  return sum;
}

float DotQ6_KReference(const void* w_row, const void* a_row, int64_t n_blocks) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0;
  uint8_t q[256];
  for (int64_t i = 0; i < n_blocks; ++i) {
    UnpackQ6_K(w[i], q);
    int32_t sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += (q[16 * s + l] - 32) * a[i].qs[16 * s + l];
      sumi += w[i].scales[s] * dot;
    }
    sum += a[i].d * Fp16ToFp32(w[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

// The K-quant dots for NT activation rows at once: each weight super-block is
// unpacked once and used for every row. Integer sums are exact and the float steps per
// row are the same as for NT = 1, so a row's result does not depend on NT (batching
// never changes outputs).
// Q4_K and Q5_K share the layout of scales, mins and low nibbles; Q5_K adds a fifth
// bit per value from qh (bit s of qh[l] for value l of sub-block s).
template <int NT, typename Block>
__attribute__((target("avx2,fma,f16c"))) void DotQ45_KAvx2N(const void* w_row, const void* const* a_rows,
                                                          int64_t n_blocks, float* out) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) ScaleMinK4(j, w[i].scales, &sc[j], &m[j]);
    __m256i lo[4], hi[4], sc_lo[4], sc_hi[4];
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * c));
      lo[c] = _mm256_and_si256(packed, low_mask);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
      if constexpr (kFifthBit) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
        const __m256i one = _mm256_set1_epi8(1);
        // Per byte: bit s of qh[l], moved to bit 4 (16-bit shifts stay inside bytes here).
        lo[c] = _mm256_or_si256(lo[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
        hi[c] = _mm256_or_si256(hi[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
      }
      sc_lo[c] = _mm256_set1_epi16(sc[2 * c]);
      sc_hi[c] = _mm256_set1_epi16(sc[2 * c + 1]);
    }
    // The mins, each twice (one per bsum of 16 values): sum_j m[j] * (bsums[2j] +
    // bsums[2j+1]) becomes one madd against the 16 bsums.
    const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    const float wd = HalfToFloat(w[i].d), wdmin = HalfToFloat(w[i].dmin);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
      const __m256i summ = _mm256_madd_epi16(bsums, mins16);
      __m256i sumi = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 64 * c));
        const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 64 * c + 32));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], a_lo), sc_lo[c]);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], a_hi), sc_hi[c]);
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(at.d * wd), _mm256_cvtepi32_ps(sumi), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(at.d * wdmin), _mm256_cvtepi32_ps(summ), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HorizontalSum(acc[t]);
}

template <int NT>
__attribute__((target("avx2,fma,f16c"))) void DotQ6_KAvx2N(const void* w_row, const void* const* a_rows,
                                                         int64_t n_blocks, float* out) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    // The 256 values (0..63, before the -32) as 8 vectors: half h, values l + 32k.
    __m256i v[8], scales[8];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[i].ql + 64 * h;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h));
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      v[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low_mask), _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4));
      v[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low_mask),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4));
      v[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4));
      v[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4));
      for (int k = 0; k < 4; ++k) {
        const int base = 128 * h + 32 * k;  // two sub-blocks of 16: base/16 and base/16 + 1
        scales[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(w[i].scales[base / 16 + 1]),
                                             _mm_set1_epi16(w[i].scales[base / 16]));
      }
    }
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const float wd = HalfToFloat(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      // sum(scale[s] * bsums[s]) * 32: the -32 offset of every value, spread over lanes.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
      __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5));
      for (int k = 0; k < 8; ++k) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], av), scales[k]));
      }
      const float d = at.d * wd;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HorizontalSum(acc[t]);
}

float DotQ4_KAvx2(const void* w_row, const void* a_row, int64_t n_blocks) {
  float out;
  DotQ45_KAvx2N<1, BlockQ4_K>(w_row, &a_row, n_blocks, &out);
  return out;
}

float DotQ5_KAvx2(const void* w_row, const void* a_row, int64_t n_blocks) {
  float out;
  DotQ45_KAvx2N<1, BlockQ5_K>(w_row, &a_row, n_blocks, &out);
  return out;
}

float DotQ6_KAvx2(const void* w_row, const void* a_row, int64_t n_blocks) {
  float out;
  DotQ6_KAvx2N<1>(w_row, &a_row, n_blocks, &out);
  return out;
}

const bool kUseAvx2 = GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;

}  // namespace

bool HasInt8Tile(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ5_0 || type == TensorType::kQ4_0;
}

int Int8TileOffset(TensorType type) {
  switch (type) {
    case TensorType::kQ5_0: return 16;
    case TensorType::kQ4_0: return 8;
    default: return 0;
  }
}

namespace {

// Scale lanes of one pair of blocks: [d0 d0 d1 d1 d0 d0 d1 d1] (see quant_dot.h).
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

const bool kUseAvx2Quantize = GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;

// Quantizes one block; returns amax (the block's scale is fp16(amax / 127)).
inline float QuantizeBlockQ8_0(const float* x, int8_t* q) {
  return kUseAvx2Quantize ? QuantizeBlockQ8_0Avx2(x, q) : QuantizeBlockQ8_0Scalar(x, q);
}

}  // namespace

namespace {

template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) void PrepareTileWeightRowAvx2(const void* w_row, int64_t n_pairs, uint8_t* q,
                                                                     float* d_lanes) {
  for (int64_t p = 0; p < n_pairs; ++p, q += 64, d_lanes += 8) {
    float d[2];
    for (int k = 0; k < 2; ++k) {
      __m256i v;
      if constexpr (kType == TensorType::kQ8_0) {
        const BlockQ8_0& b = static_cast<const BlockQ8_0*>(w_row)[2 * p + k];
        v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
        d[k] = HalfToFloat(b.d);
      } else if constexpr (kType == TensorType::kQ5_0) {
        const BlockQ5_0& b = static_cast<const BlockQ5_0*>(w_row)[2 * p + k];
        v = _mm256_or_si256(NibblesToBytes(b.qs), _mm256_and_si256(BytesFromBits32(b.qh), _mm256_set1_epi8(0x10)));
        d[k] = HalfToFloat(b.d);
      } else {
        const BlockQ4_0& b = static_cast<const BlockQ4_0*>(w_row)[2 * p + k];
        v = NibblesToBytes(b.qs);
        d[k] = HalfToFloat(b.d);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * k), v);
    }
    _mm256_storeu_ps(d_lanes, _mm256_setr_ps(d[0], d[0], d[1], d[1], d[0], d[0], d[1], d[1]));
  }
}

}  // namespace

void PrepareTileWeightRow(TensorType type, const void* w_row, int64_t cols, uint8_t* q, float* d_lanes) {
  if (kUseAvx2Quantize) {
    switch (type) {
      case TensorType::kQ8_0: return PrepareTileWeightRowAvx2<TensorType::kQ8_0>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ5_0: return PrepareTileWeightRowAvx2<TensorType::kQ5_0>(w_row, cols / 64, q, d_lanes);
      case TensorType::kQ4_0: return PrepareTileWeightRowAvx2<TensorType::kQ4_0>(w_row, cols / 64, q, d_lanes);
      default: break;
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
      default: TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
    }
    if (i % 2 == 1) PairLanes(d[0], d[1], d_lanes + 8 * (i / 2));
  }
}

void PrepareTileActivationRow(const float* x, int64_t cols, int offset, int8_t* q, float* d_lanes, int32_t* corr) {
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

void DotInt8Tile4x2Scalar(int offset, const TileOperand w[4], const TileOperand a[2], int64_t n_pairs,
                          float out[4][2]) {
  for (int r = 0; r < 4; ++r) {
    const uint8_t* wq = static_cast<const uint8_t*>(w[r].q);
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      float sum = 0;
      for (int64_t b = 0; b < 2 * n_pairs; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) {
          const int wv = offset == 0 ? static_cast<int8_t>(wq[32 * b + j]) : wq[32 * b + j] - offset;
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
__attribute__((target("avx2,fma"))) void DotInt8Tile4x2Avx2(const TileOperand w[4], const TileOperand a[2],
                                                          int64_t n_pairs, float out[4][2]) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
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
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + 64 * p + 32));
        __m256i m0, m1;
        if constexpr (kSigned) {
          m0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
          m1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
        } else {
          m0 = _mm256_maddubs_epi16(w0, x0);
          m1 = _mm256_maddubs_epi16(w1, x1);
        }
        // Lanes: [b0 b0 b1 b1 b0 b0 b1 b1], each the sum of 8 products.
        __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
        if constexpr (!kSigned) {
          h = _mm256_sub_epi32(h, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].corr + 8 * p)));
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

// [d0 d0 d1 d1 d0 d0 d1 d1] from two fp16 scales: one conversion, one permute.
__attribute__((target("avx2,fma,f16c"))) inline __m256 PairScaleLanes(uint16_t d0, uint16_t d1) {
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d0 | (static_cast<uint32_t>(d1) << 16))));
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(both), _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
}

// DotTileRow's vector path: each pair of weight blocks decoded as PrepareTileWeightRow
// would, then exactly the tile's per-lane steps for one row and one token.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) float DotTileRowAvx2(const void* w_row, const TileOperand& a, int64_t n_pairs) {
  constexpr bool kSigned = kType == TensorType::kQ8_0;
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* aq = static_cast<const int8_t*>(a.q);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t p = 0; p < n_pairs; ++p) {
    __m256i w0, w1;
    uint16_t d0, d1;
    if constexpr (kType == TensorType::kQ8_0) {
      const BlockQ8_0* b = static_cast<const BlockQ8_0*>(w_row) + 2 * p;
      w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs));
      w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs));
      d0 = b[0].d;
      d1 = b[1].d;
    } else if constexpr (kType == TensorType::kQ5_0) {
      const BlockQ5_0* b = static_cast<const BlockQ5_0*>(w_row) + 2 * p;
      const __m256i bit4 = _mm256_set1_epi8(0x10);
      w0 = _mm256_or_si256(NibblesToBytes(b[0].qs), _mm256_and_si256(BytesFromBits32(b[0].qh), bit4));
      w1 = _mm256_or_si256(NibblesToBytes(b[1].qs), _mm256_and_si256(BytesFromBits32(b[1].qh), bit4));
      d0 = b[0].d;
      d1 = b[1].d;
    } else {
      const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w_row) + 2 * p;
      w0 = NibblesToBytes(b[0].qs);
      w1 = NibblesToBytes(b[1].qs);
      d0 = b[0].d;
      d1 = b[1].d;
    }
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p + 32));
    __m256i m0, m1;
    if constexpr (kSigned) {
      m0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
      m1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    } else {
      m0 = _mm256_maddubs_epi16(w0, x0);
      m1 = _mm256_maddubs_epi16(w1, x1);
    }
    __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
    if constexpr (!kSigned) {
      h = _mm256_sub_epi32(h, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.corr + 8 * p)));
    }
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
      case TensorType::kQ8_0: return DotTileRowAvx2<TensorType::kQ8_0>(w_row, a, n_pairs);
      case TensorType::kQ5_0: return DotTileRowAvx2<TensorType::kQ5_0>(w_row, a, n_pairs);
      case TensorType::kQ4_0: return DotTileRowAvx2<TensorType::kQ4_0>(w_row, a, n_pairs);
      default: TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
    }
  }
  // Scalar: decode the row and run the tile's scalar arithmetic for it.
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> d;
  q.resize(static_cast<size_t>(64 * n_pairs));
  d.resize(static_cast<size_t>(8 * n_pairs));
  PrepareTileWeightRow(type, w_row, 64 * n_pairs, q.data(), d.data());
  const TileOperand w[4] = {{q.data(), d.data(), nullptr}, {q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr}, {q.data(), d.data(), nullptr}};
  const TileOperand act[2] = {a, a};
  float out[4][2];
  DotInt8Tile4x2Scalar(Int8TileOffset(type), w, act, n_pairs, out);
  return out[0][0];
}

void DotInt8Tile4x2(int offset, const TileOperand w[4], const TileOperand& a0, const TileOperand& a1,
                    int64_t n_pairs, float out[4][2]) {
  const TileOperand a[2] = {a0, a1};
  if (!kUseAvx2Quantize) return DotInt8Tile4x2Scalar(offset, w, a, n_pairs, out);
  if (offset == 0) return DotInt8Tile4x2Avx2<true>(w, a, n_pairs, out);
  DotInt8Tile4x2Avx2<false>(w, a, n_pairs, out);
}

bool HasQ8Dot(TensorType type) {
  switch (type) {
    case TensorType::kQ8_0:
    case TensorType::kQ5_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_K:
    case TensorType::kQ6_K:
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ5_K: return true;
    default: return false;
  }
}

float VecDotQ8Reference(TensorType type, const void* w, const void* a, int64_t cols) {
  const int64_t n = cols / 32;
  switch (type) {
    case TensorType::kQ4_K: return DotQ4_KReference(w, a, cols / 256);
    case TensorType::kQ6_K: return DotQ6_KReference(w, a, cols / 256);
    case TensorType::kQ8_0:
      return DotScalar<BlockQ8_0>(w, a, n, [](const BlockQ8_0& b, int8_t* q) { std::memcpy(q, b.qs, 32); });
    case TensorType::kQ5_0: return DotScalar<BlockQ5_0>(w, a, n, UnpackQ5_0);
    case TensorType::kQ4_0: return DotScalar<BlockQ4_0>(w, a, n, UnpackQ4_0);
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ5_K: return VecDotGeneric(type, w, a, cols);
    default: TANDEM_CHECK(false) << "no Q8 dot for type " << static_cast<int>(type);
  }
  return 0;
}

float VecDotQ8(TensorType type, const void* w, const void* a, int64_t cols) {
  if (!kUseAvx2) return VecDotQ8Reference(type, w, a, cols);
  switch (type) {
    case TensorType::kQ8_0: return DotQ8_0Avx2(w, a, cols / 32);
    case TensorType::kQ5_0: return DotQ5_0Avx2(w, a, cols / 32);
    case TensorType::kQ4_0: return DotQ4_0Avx2(w, a, cols / 32);
    case TensorType::kQ4_K: return DotQ4_KAvx2(w, a, cols / 256);
    case TensorType::kQ6_K: return DotQ6_KAvx2(w, a, cols / 256);
    case TensorType::kQ5_K: return DotQ5_KAvx2(w, a, cols / 256);
    default: return VecDotQ8Reference(type, w, a, cols);
  }
}

bool HasMultiTokenDot(TensorType type) {
  return kUseAvx2 && (type == TensorType::kQ4_K || type == TensorType::kQ5_K || type == TensorType::kQ6_K);
}

void VecDotQ8x4(TensorType type, const void* w_row, const void* const a_rows[4], int64_t cols, float out[4]) {
  if (type == TensorType::kQ4_K) return DotQ45_KAvx2N<4, BlockQ4_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx2N<4, BlockQ5_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ6_K) return DotQ6_KAvx2N<4>(w_row, a_rows, cols / 256, out);
  for (int t = 0; t < 4; ++t) out[t] = VecDotQ8(type, w_row, a_rows[t], cols);
}

ActivationFormat ActivationFormatFor(TensorType type) {
  switch (type) {
    case TensorType::kQ8_0:
    case TensorType::kQ5_0:
    case TensorType::kQ4_0: return ActivationFormat::kQ8_0;
    case TensorType::kQ4_1:
    case TensorType::kQ5_1: return ActivationFormat::kQ8_1;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K: return ActivationFormat::kQ8_K;
    case TensorType::kF16: return ActivationFormat::kF16Rounded;
    case TensorType::kBF16: return ActivationFormat::kBF16Rounded;
    default: return ActivationFormat::kF32;
  }
}

int64_t ActivationRowBytes(ActivationFormat format, int64_t cols) {
  switch (format) {
    case ActivationFormat::kQ8_0: return cols / 32 * static_cast<int64_t>(sizeof(BlockQ8_0));
    case ActivationFormat::kQ8_1: return cols / 32 * static_cast<int64_t>(sizeof(BlockQ8_1));
    case ActivationFormat::kQ8_K: return cols / 256 * static_cast<int64_t>(sizeof(BlockQ8_K));
    default: return cols * static_cast<int64_t>(sizeof(float));
  }
}

namespace {

// The values of one Q8_K block from QuantizeRowQ8_K's iscale, 256 at a time, and the
// sums of each 16. Same float multiply and round-half-even as the scalar loop.
__attribute__((target("avx2,fma"))) void QuantizeQ8_KValuesAvx2(const float* x, float iscale, BlockQ8_K& y) {
  const __m256 s = _mm256_set1_ps(iscale);
  const __m256i max_q = _mm256_set1_epi32(127);
  for (int g = 0; g < 8; ++g) {  // 32 values per step
    __m256i i[4];
    for (int k = 0; k < 4; ++k) {
      i[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), s)), max_q);
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i sum8 = _mm256_add_epi32(i[2 * h], i[2 * h + 1]);
      __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0x4e));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0xb1));
      y.bsums[2 * g + h] = static_cast<int16_t>(_mm_cvtsi128_si32(sum4));
    }
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.qs + 32 * g),
                        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

}  // namespace

void QuantizeRowQ8_K(const float* x, BlockQ8_K* out, int64_t cols) {
  TANDEM_CHECK(cols % 256 == 0);
  for (int64_t b = 0; b < cols / 256; ++b, x += 256) {
    BlockQ8_K& y = out[b];
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -127.0f / max;
    if (kUseAvx2Quantize) {
      QuantizeQ8_KValuesAvx2(x, iscale, y);
    } else {
      for (int j = 0; j < 256; ++j) {
        const int v = static_cast<int>(std::nearbyint(iscale * x[j]));  // half to even, as ggml
        y.qs[j] = static_cast<int8_t>(std::min(127, v));
      }
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += y.qs[j * 16 + i];
        y.bsums[j] = static_cast<int16_t>(sum);
      }
    }
    y.d = 1 / iscale;
  }
}

// Activations to Q8_0 as ggml's x86 CPU backend does at run time (its SIMD
// quantize_row_q8_0): scale by 127 / amax and round half to even. The reference
// QuantizeRowQ8_0 (divide by d, round half away from zero) differs in rare last-bit
// cases; matching the run-time path keeps results closer to llama.cpp's.
void QuantizeActivationsQ8_0(const float* x, BlockQ8_0* out, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; ++b, x += 32) {
    const float amax = QuantizeBlockQ8_0(x, out[b].qs);
    out[b].d = Fp32ToFp16(amax / 127.0f);
  }
}

void QuantizeActivations(ActivationFormat format, const float* x, int64_t cols, void* out) {
  switch (format) {
    case ActivationFormat::kQ8_0: QuantizeActivationsQ8_0(x, static_cast<BlockQ8_0*>(out), cols); return;
    case ActivationFormat::kQ8_1: QuantizeRowQ8_1(x, static_cast<BlockQ8_1*>(out), cols); return;
    case ActivationFormat::kQ8_K: QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(out), cols); return;
    case ActivationFormat::kF16Rounded: {
      float* y = static_cast<float*>(out);
      for (int64_t i = 0; i < cols; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
      return;
    }
    case ActivationFormat::kBF16Rounded: {
      float* y = static_cast<float*>(out);
      for (int64_t i = 0; i < cols; ++i) y[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
      return;
    }
    case ActivationFormat::kF32: std::memcpy(out, x, cols * sizeof(float)); return;
  }
}

}  // namespace tandem
