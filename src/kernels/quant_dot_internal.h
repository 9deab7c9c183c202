// Pieces shared by the quant_dot*.cc files (not part of the kernels' public API).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/tensor_type.h"
#include "kernels/dequant.h"

namespace tandem {

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (shared with dequant.cc).
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Scalar dots for Q4_1, Q5_1 (Q8_1 activations) and Q2_K, Q3_K, Q5_K (Q8_K).
float VecDotGeneric(TensorType type, const void* w_row, const void* a_row, int64_t cols);

// Signed 5-bit / 4-bit / 8-bit weight values of one 32-value block.
inline void UnpackQ4_0(const BlockQ4_0& b, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 0x0F) - 8);
    q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
}

inline void UnpackQ5_0(const BlockQ5_0& b, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
    q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
  }
}

// Quantizes 32 activations to int8 the way QuantizeActivations(kQ8_0) does (AVX2 when
// present); returns amax (the block's scale is fp16(amax / 127)). In int8_tile.cc.
float QuantizeBlockQ8_0(const float* x, int8_t* q);

// ---- AVX2 helpers (callers must themselves be compiled for AVX2) ----

__attribute__((target("avx2,fma,f16c"))) inline float HalfToFloat(uint16_t h) {
  return _cvtsh_ss(h);
}

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

// 16 bytes of nibbles -> 32 bytes: low nibbles first (values 0..15), then high. One
// 128-bit broadcast load and a per-half shift (0 or 4 bits).
__attribute__((target("avx2"))) inline __m256i NibblesToBytes(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4)),
                          _mm256_set1_epi8(0x0F));
}

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- AVX-512 helpers: two tokens per zmm register, one in each 256-bit half ----
// (the avx512 level: F, BW, VL and VNNI; callers compiled for TANDEM_AVX512_TARGET)

#define TANDEM_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"

// [lo | hi] from two 256-bit loads.
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512i JoinHalves(const void* lo,
                                                                       const void* hi) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
      _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512 JoinHalves(const float* lo,
                                                                      const float* hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(
      _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo))),
      _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512 BothHalves(__m256 v) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v)));
}

// HorizontalSum of each half.
__attribute__((target(TANDEM_AVX512_TARGET))) inline void HalfSums(__m512 acc, float* lo,
                                                                  float* hi) {
  *lo = HorizontalSum(_mm512_castps512_ps256(acc));
  *hi = HorizontalSum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

// x negated where the weight byte is negative (the mask): vpsignb has no 512-bit form.
// Where the weight is 0 x is kept, but its product with |w| = 0 is 0 as vpsignb's is.
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512i NegateWhere(__mmask64 negative,
                                                                        __m512i x) {
  return _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
}

}  // namespace tandem
