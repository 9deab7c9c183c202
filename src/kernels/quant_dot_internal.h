// Pieces shared by the quant_dot*.cc and int8_tile*.cc files (not part of the kernels'
// public API).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

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

// The sum of the 8 int32 lanes (exact).
__attribute__((target("avx2"))) inline int32_t SumLanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// One super-block of Q4_K in llama.cpp's repack order (DotQ4_KReference): the integer
// sums sumi and summ (8 lanes each; their lane totals isum and imin) folded exactly into
// [isum, imin, isum, imin], then acc = fma(float(that), scale, acc) with scale =
// [d_w * d_x, dmin_w * d_x, ...]: lane 0 carries acc, lane 1 acc_min.
__attribute__((target("avx2,fma"))) inline __m128 Q4_KLlamaStep(__m256i sumi, __m256i summ, __m128 scale,
                                                               __m128 acc) {
  const __m256i pairs = _mm256_hadd_epi32(sumi, summ);
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
  q = _mm_hadd_epi32(q, q);
  return _mm_fmadd_ps(_mm_cvtepi32_ps(q), scale, acc);
}

// [wd, wdmin, wd, wdmin] x d_x: the scale of Q4_KLlamaStep (each product rounded as the
// scalar wd * d_x).
__attribute__((target("avx2,fma"))) inline __m128 Q4_KLlamaScale(__m128 w_scales, float d_x) {
  return _mm_mul_ps(w_scales, _mm_set1_ps(d_x));
}

// Q4_KLlamaStep for two tokens' sums of one super-block: [isum0, imin0, isum1, imin1] exact,
// scaled by [wd * d_x0, wdmin * d_x0, wd * d_x1, wdmin * d_x1] (w_scales = [wd, wdmin, wd,
// wdmin]) and fma'd into acc = [acc0, acc_min0, acc1, acc_min1]: per lane Q4_KLlamaStep's
// operations, so the same bits.
__attribute__((target("avx2,fma"))) inline __m128 Q4_KLlamaStep2(__m256i sumi0, __m256i summ0, __m256i sumi1,
                                                                __m256i summ1, __m128 w_scales, float d_x0,
                                                                float d_x1, __m128 acc) {
  const __m256i x = _mm256_hadd_epi32(_mm256_hadd_epi32(sumi0, summ0), _mm256_hadd_epi32(sumi1, summ1));
  const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  const __m128 dx = _mm_blend_ps(_mm_set1_ps(d_x0), _mm_set1_ps(d_x1), 0b1100);
  return _mm_fmadd_ps(_mm_cvtepi32_ps(q), _mm_mul_ps(w_scales, dx), acc);
}

// out[0..1] = acc - acc_min of the two tokens of Q4_KLlamaStep2's accumulator.
__attribute__((target("avx2"))) inline void Q4_KLlamaResult2(__m128 acc, float out[2]) {
  out[0] = _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc));
  const __m128 hi = _mm_movehl_ps(acc, acc);
  out[1] = _mm_cvtss_f32(hi) - _mm_cvtss_f32(_mm_movehdup_ps(hi));
}

// acc - acc_min of Q4_KLlamaStep's accumulator.
__attribute__((target("avx2,fma"))) inline float Q4_KLlamaResult(__m128 acc) {
  return _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc));
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

// Q4_KLlamaStep for two tokens, one per 256-bit half (sumi, summ, scale as the halves'
// tokens): after the exact folds 128-bit lane 0 holds [isum0, isum0, imin0, imin0] and lane
// 2 the second token's; scale carries [d_w * d_x, d_w * d_x, dmin_w * d_x, dmin_w * d_x]
// per 128-bit lane. Token 0's result is acc[0] - acc[2], token 1's acc[8] - acc[10].
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512 Q4_KLlamaStepHalves(__m512i sumi, __m512i summ,
                                                                               __m512 scale, __m512 acc) {
  __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(sumi, summ), _mm512_unpackhi_epi64(sumi, summ));
  q = _mm512_add_epi32(q, _mm512_shuffle_epi32(q, _MM_PERM_CDAB));
  q = _mm512_add_epi32(q, _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), scale, acc);
}

__attribute__((target(TANDEM_AVX512_TARGET))) inline void Q4_KLlamaResultHalves(__m512 acc, float* lo,
                                                                               float* hi) {
  alignas(64) float v[16];
  _mm512_store_ps(v, acc);
  *lo = v[0] - v[2];
  *hi = v[8] - v[10];
}

// x negated where the weight byte is negative (the mask): vpsignb has no 512-bit form.
// Where the weight is 0 x is kept, but its product with |w| = 0 is 0 as vpsignb's is.
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512i NegateWhere(__mmask64 negative,
                                                                        __m512i x) {
  return _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
}

// The 8 six-bit scales and mins of a Q4_K / Q5_K super-block (ScaleMinK4's values) in
// one vector: bytes 0..7 scales 0..7, bytes 8..15 mins 0..7. It loads 16 bytes from
// `scales` (the 12 scale bytes and the first 4 of qs, which follow them in both blocks).
// Byte j < 4 of the 12 holds scale j (low 6 bits) and the top bits of scale j + 4;
// bytes 4..7 the mins likewise; bytes 8..11 the low 4 bits of scale / min j + 4.
__attribute__((target("avx2,fma,f16c"))) inline __m128i UnpackScalesMinsK4(const uint8_t* scales) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  // low: [b0..3 | b8..11 | b4..7 | b8..11], top: b0..3 / b4..7 under scales / mins 4..7.
  const __m128i low = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i six = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
  const __m128i high_nibble = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15);
  // 16-bit shifts: the bits they carry across bytes fall outside the masks.
  const __m128i r = _mm_or_si128(_mm_and_si128(low, six), _mm_and_si128(_mm_srli_epi16(low, 4), high_nibble));
  return _mm_or_si128(r, _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
}

// Sub-blocks 2c and 2c + 1 of a Q4_K / Q5_K super-block, as UnpackQ45_KAvx2's lo[c],
// hi[c], sc_lo[c] and sc_hi[c] (scales16: the 8 scales as int16, in both 128-bit lanes).
template <typename Block>
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ45_KPairAvx2(const Block& b, __m256i scales16, int c,
                                                                         __m256i* lo, __m256i* hi,
                                                                         __m256i* sc_lo, __m256i* sc_hi) {
  const __m256i kLowMask = _mm256_set1_epi8(0x0F);
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
  *lo = _mm256_and_si256(packed, kLowMask);
  *hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), kLowMask);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i one = _mm256_set1_epi8(1);
    // Per byte: bit s of qh[l], moved to bit 4 (16-bit shifts stay inside bytes here).
    *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
    *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
  }
  *sc_lo = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 1) + 4 * c)));
  *sc_hi = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 3) + 4 * c + 2)));
}

// One Q4_K / Q5_K super-block unpacked for the dots: lo[c] / hi[c] the values of
// sub-blocks 2c / 2c + 1 (0..15, or 0..31 with Q5_K's fifth bit), sc_lo[c] / sc_hi[c]
// their scales as int16 in every lane, mins16 each sub-block's min twice (one per bsum).
template <typename Block>
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ45_KAvx2(const Block& b, __m256i lo[4],
                                                                     __m256i hi[4], __m256i sc_lo[4],
                                                                     __m256i sc_hi[4],
                                                                     __m256i* mins16) {
  const __m128i scales_mins = UnpackScalesMinsK4(b.scales);
  // Scales as int16 in both 128-bit lanes; sc_lo/sc_hi[c] broadcast scale 2c / 2c + 1.
  const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
  for (int c = 0; c < 4; ++c) UnpackQ45_KPairAvx2(b, scales16, c, &lo[c], &hi[c], &sc_lo[c], &sc_hi[c]);
  // The mins, each twice (one per bsum of 16 values): sum_j m[j] * (bsums[2j] +
  // bsums[2j+1]) becomes one madd against the 16 bsums.
  *mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scales_mins, scales_mins));
}

// The scales of values 32j..32j+31 of a Q6_K super-block as int16: scale 2j in the low
// 128-bit lane, 2j + 1 in the high one (scales16: the 16 scales as int16).
__attribute__((target("avx2,fma,f16c"))) inline __m256i Q6_KScalePair(__m256i scales16, int j) {
  // Scales 8h..8h+7 (h = j / 4) in both lanes, then word 2(j % 4) / 2(j % 4) + 1 of them.
  const __m256i half = j < 4 ? _mm256_permute4x64_epi64(scales16, 0x44) : _mm256_permute4x64_epi64(scales16, 0xEE);
  const int w = 2 * (j % 4);  // bytes 2w, 2w + 1 in every word of the low lane, the next word's in the high
  const __m256i index = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 * (2 * w + 3) + 2 * w + 2)),
                                         _mm_set1_epi16(static_cast<int16_t>(0x0100 * (2 * w + 1) + 2 * w)));
  return _mm256_shuffle_epi8(half, index);
}

// Half h of a Q6_K super-block: v[k] its 32 values l + 32k (0..63, before the -32).
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ6_KHalfAvx2(const BlockQ6_K& b, int h, __m256i v[4]) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  const uint8_t* ql = b.ql + 64 * h;
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  v[0] = _mm256_or_si256(_mm256_and_si256(ql0, low_mask), _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4));
  v[1] = _mm256_or_si256(_mm256_and_si256(ql1, low_mask),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4));
  v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4));
  v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4));
}

// One Q6_K super-block unpacked for the dots: v[4h + k] the 32 values l + 32k of half h
// (0..63, before the -32), scales[4h + k] their two sub-blocks' scales as int16 (one per
// 128-bit lane), scales16 the 16 scales.
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ6_KAvx2(const BlockQ6_K& b, __m256i v[8],
                                                                    __m256i scales[8],
                                                                    __m256i* scales16) {
  // The 256 values (0..63, before the -32) as 8 vectors: half h, values l + 32k.
  UnpackQ6_KHalfAvx2(b, 0, v);
  UnpackQ6_KHalfAvx2(b, 1, v + 4);
  *scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  for (int j = 0; j < 8; ++j) scales[j] = Q6_KScalePair(*scales16, j);
}

// The avx512 K-quant dots (quant_dot_avx512.cc), for a CPU at the avx512 level: Q4_K,
// Q5_K, Q6_K weights x Q8_K rows. 2 * pairs (2 or 4) rows given as pointers, and one row.
void KQuantDotAvx512(int pairs, TensorType type, const void* w_row, const void* const* a_rows, int64_t n_blocks,
                     float* out);
float KQuantDotAvx512One(TensorType type, const void* w_row, const void* a_row, int64_t n_blocks);

}  // namespace tandem
