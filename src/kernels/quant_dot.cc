#include "kernels/quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/logging.h"
#include "kernels/isa.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

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
// Sum of the 32 products of signed bytes, as 8 int32 lanes converted to float.
__attribute__((target("avx2"))) inline __m256 DotBytes(__m256i w, __m256i a) {
  const __m256i abs_w = _mm256_sign_epi8(w, w);
  const __m256i signed_a = _mm256_sign_epi8(a, w);
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, signed_a);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
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

// One Q4_K / Q5_K super-block unpacked for the dots: lo[c] / hi[c] the values of
// sub-blocks 2c / 2c + 1 (0..15, or 0..31 with Q5_K's fifth bit), sc_lo[c] / sc_hi[c]
// their scales as int16 in every lane, mins16 each sub-block's min twice (one per bsum).
template <typename Block>
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ45_KAvx2(const Block& b, __m256i lo[4],
                                                                     __m256i hi[4], __m256i sc_lo[4],
                                                                     __m256i sc_hi[4],
                                                                     __m256i* mins16) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  const __m256i kLowMask = _mm256_set1_epi8(0x0F);
  // The 8 six-bit scales and mins (ScaleMinK4's values) unpacked with 32-bit ops:
  // u[0..1] = scales 0..7, u[2..3] = mins 0..7, one byte each.
  uint32_t u[4];
  std::memcpy(u, b.scales, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kTop2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kTop2) << 4);
  const uint32_t mins_lo = u[1] & kLow6;
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kTop2) << 4);
  u[2] = mins_lo;
  u[0] &= kLow6;
  // Scales as int16 in both 128-bit lanes; sc_lo/sc_hi[c] broadcast scale 2c / 2c + 1.
  const __m256i scales16 = _mm256_broadcastsi128_si256(
      _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(u[1]), static_cast<int>(u[0]))));
  for (int c = 0; c < 4; ++c) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
    lo[c] = _mm256_and_si256(packed, kLowMask);
    hi[c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), kLowMask);
    if constexpr (kFifthBit) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
      const __m256i one = _mm256_set1_epi8(1);
      // Per byte: bit s of qh[l], moved to bit 4 (16-bit shifts stay inside bytes here).
      lo[c] = _mm256_or_si256(
          lo[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
      hi[c] = _mm256_or_si256(
          hi[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
    }
    sc_lo[c] = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 1) + 4 * c)));
    sc_hi[c] = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 3) + 4 * c + 2)));
  }
  // The mins, each twice (one per bsum of 16 values): sum_j m[j] * (bsums[2j] +
  // bsums[2j+1]) becomes one madd against the 16 bsums.
  const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(u[3]), static_cast<int>(u[2]));
  *mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

// The K-quant dots for NT activation rows at once: each weight super-block is
// unpacked once and used for every row. Integer sums are exact and the float steps per
// row are the same as for NT = 1, so a row's result does not depend on NT (batching
// never changes outputs).
// Q4_K and Q5_K share the layout of scales, mins and low nibbles; Q5_K adds a fifth
// bit per value from qh (bit s of qh[l] for value l of sub-block s).
template <int NT, typename Block>
__attribute__((target("avx2,fma,f16c"))) void DotQ45_KAvx2N(const void* w_row,
                                                            const void* const* a_rows,
                                                            int64_t n_blocks, float* out) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    // Decode reads each weight once: fetch ~1.5 KB ahead (the next row's start at a row's
    // end, which is the row this thread dots next).
    if constexpr (NT == 1) {
      const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
    }
    __m256i lo[4], hi[4], sc_lo[4], sc_hi[4], mins16;
    UnpackQ45_KAvx2(w[i], lo, hi, sc_lo, sc_hi, &mins16);
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

// One Q6_K super-block unpacked for the dots: v[4h + k] the 32 values l + 32k of half h
// (0..63, before the -32), scales[4h + k] their two sub-blocks' scales as int16 (one per
// 128-bit lane), scales16 the 16 scales.
__attribute__((target("avx2,fma,f16c"))) inline void UnpackQ6_KAvx2(const BlockQ6_K& b, __m256i v[8],
                                                                    __m256i scales[8],
                                                                    __m256i* scales16) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  // The 256 values (0..63, before the -32) as 8 vectors: half h, values l + 32k.
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
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
      scales[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(b.scales[base / 16 + 1]),
                                           _mm_set1_epi16(b.scales[base / 16]));
    }
  }
  *scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
}

template <int NT>
__attribute__((target("avx2,fma,f16c"))) void DotQ6_KAvx2N(const void* w_row, const void* const* a_rows,
                                                         int64_t n_blocks, float* out) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    if constexpr (NT == 1) {  // as in DotQ45_KAvx2N
      const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
      _mm_prefetch(ahead + 192, _MM_HINT_T0);
    }
    __m256i v[8], scales[8], scales16;
    UnpackQ6_KAvx2(w[i], v, scales, &scales16);
    const float wd = HalfToFloat(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      // sum(scale[s] * bsums[s]) * 32: the -32 offset of every value, spread over lanes.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
      __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
                                      _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5));
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

// The K-quant dots at the avx512 level: DotQ45_KAvx2N / DotQ6_KAvx2N's arithmetic with
// tokens 2h and 2h + 1 in the two halves of register h (each super-block unpacked once,
// broadcast to both halves), and `vpdpwssd` (AVX-512 VNNI) fusing each `vpmaddwd` with
// its add: the same integers, the same float steps per token, so the same bits.
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512 ScalarHalves(float lo, float hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(lo)),
                                             _mm256_castps_pd(_mm256_set1_ps(hi)), 1));
}

// Where the avx512 K-quant dots read token pair h's activations of super-block i: two
// rows joined per load (JoinedQ8K), or a record of PairedQ8K laid out once per MatMul
// (PairedQ8KView: every load one full register). Both give the same values.
struct JoinedQ8K {
  const BlockQ8_K* const* a;  // 2 * NP rows
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512i Qs(int h, int64_t i, int k) const {
    return JoinHalves(a[2 * h][i].qs + 32 * k, a[2 * h + 1][i].qs + 32 * k);
  }
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512i Bsums(int h, int64_t i) const {
    return JoinHalves(a[2 * h][i].bsums, a[2 * h + 1][i].bsums);
  }
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512 D(int h, int64_t i) const {
    return ScalarHalves(a[2 * h][i].d, a[2 * h + 1][i].d);
  }
};

struct PairedQ8KView {
  const uint8_t* base;  // token pair h0's first record
  int64_t n_blocks;
  const uint8_t* Record(int h, int64_t i) const { return base + (h * n_blocks + i) * kPairedQ8KRecordBytes; }
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512i Qs(int h, int64_t i, int k) const {
    return _mm512_loadu_si512(Record(h, i) + 64 * k);
  }
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512i Bsums(int h, int64_t i) const {
    return _mm512_loadu_si512(Record(h, i) + 512);
  }
  __attribute__((target(TANDEM_AVX512_TARGET))) __m512 D(int h, int64_t i) const {
    float d[2];
    std::memcpy(d, Record(h, i) + 576, sizeof(d));
    return ScalarHalves(d[0], d[1]);
  }
};

// D(h, i) x the weight's scale per half: [d0 * wd | d1 * wd], the products the AVX2 path
// forms in scalar floats (the same roundings).
template <int NP, typename Block, typename Src>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ45_KAvx512(const void* w_row, const Src& a,
                                                                  int64_t n_blocks, float* out) {
  const Block* w = static_cast<const Block*>(w_row);
  __m512 acc[NP];
  for (int h = 0; h < NP; ++h) acc[h] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    __m256i lo[4], hi[4], sc_lo[4], sc_hi[4], mins16;
    UnpackQ45_KAvx2(w[i], lo, hi, sc_lo, sc_hi, &mins16);
    __m512i lo2[4], hi2[4], sc_lo2[4], sc_hi2[4];
    for (int c = 0; c < 4; ++c) {
      lo2[c] = _mm512_broadcast_i64x4(lo[c]);
      hi2[c] = _mm512_broadcast_i64x4(hi[c]);
      sc_lo2[c] = _mm512_broadcast_i64x4(sc_lo[c]);
      sc_hi2[c] = _mm512_broadcast_i64x4(sc_hi[c]);
    }
    const __m512i mins2 = _mm512_broadcast_i64x4(mins16);
    const __m512 wd = _mm512_set1_ps(HalfToFloat(w[i].d));
    const __m512 wdmin = _mm512_set1_ps(HalfToFloat(w[i].dmin));
#pragma GCC unroll 4
    for (int h = 0; h < NP; ++h) {
      const __m512i summ = _mm512_madd_epi16(a.Bsums(h, i), mins2);
      __m512i sumi = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(lo2[c], a.Qs(h, i, 2 * c)), sc_lo2[c]);
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(hi2[c], a.Qs(h, i, 2 * c + 1)), sc_hi2[c]);
      }
      const __m512 d = a.D(h, i);
      acc[h] = _mm512_fmadd_ps(_mm512_mul_ps(d, wd), _mm512_cvtepi32_ps(sumi), acc[h]);
      acc[h] = _mm512_fnmadd_ps(_mm512_mul_ps(d, wdmin), _mm512_cvtepi32_ps(summ), acc[h]);
    }
  }
  for (int h = 0; h < NP; ++h) HalfSums(acc[h], &out[2 * h], &out[2 * h + 1]);
}

template <int NP, typename Src>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ6_KAvx512(const void* w_row, const Src& a,
                                                                 int64_t n_blocks, float* out) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  __m512 acc[NP];
  for (int h = 0; h < NP; ++h) acc[h] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    __m256i v[8], scales[8], scales16;
    UnpackQ6_KAvx2(w[i], v, scales, &scales16);
    __m512i v2[8], scales2[8];
    for (int k = 0; k < 8; ++k) {
      v2[k] = _mm512_broadcast_i64x4(v[k]);
      scales2[k] = _mm512_broadcast_i64x4(scales[k]);
    }
    const __m512i scales16_2 = _mm512_broadcast_i64x4(scales16);
    const __m512 wd = _mm512_set1_ps(HalfToFloat(w[i].d));
#pragma GCC unroll 4
    for (int h = 0; h < NP; ++h) {
      __m512i sumi = _mm512_sub_epi32(
          _mm512_setzero_si512(), _mm512_slli_epi32(_mm512_madd_epi16(a.Bsums(h, i), scales16_2), 5));
      for (int k = 0; k < 8; ++k) {
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(v2[k], a.Qs(h, i, k)), scales2[k]);
      }
      acc[h] = _mm512_fmadd_ps(_mm512_mul_ps(a.D(h, i), wd), _mm512_cvtepi32_ps(sumi), acc[h]);
    }
  }
  for (int h = 0; h < NP; ++h) HalfSums(acc[h], &out[2 * h], &out[2 * h + 1]);
}

// The one-token K-quant dots at the avx512 level (decode's hot loop): DotQ45_KAvx2N<1> /
// DotQ6_KAvx2N<1>'s integers with two of the AVX2 path's 32-value vectors in one register
// (the two halves: their activations are 64 contiguous bytes of the Q8_K row), each
// vpmaddwd + add fused into vpdpwssd. Every 32-bit lane of the AVX2 path's sum is the sum
// of the same lane of both halves here (exact integer adds), and the float steps are the
// AVX2 path's on the folded 8 lanes, so the bits are the same.
template <typename Block>
__attribute__((target(TANDEM_AVX512_TARGET))) float DotQ45_KAvx512One(const void* w_row, const void* a_row,
                                                                      int64_t n_blocks) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1);
  // Nibble c of the packed bytes: the low one in the low half, the high one in the high half.
  const __m512i nibble_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  // Scale 2c (low half) and 2c + 1 (high half) of the 8 int16 scales, in every int16.
  __m512i scale_index[4], qh_shift[4];
  for (int c = 0; c < 4; ++c) {
    const __m256i lo = _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 1) + 4 * c));
    const __m256i hi = _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (4 * c + 3) + 4 * c + 2));
    scale_index[c] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    qh_shift[c] = _mm512_set_epi64(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c);
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;  // as DotQ45_KAvx2N
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    _mm_prefetch(ahead + 128, _MM_HINT_T0);
    const Block& b = w[i];
    // UnpackQ45_KAvx2's scales and mins.
    uint32_t u[4];
    std::memcpy(u, b.scales, 12);
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kTop2 = 0x03030303;
    u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kTop2) << 4);
    const uint32_t mins_lo = u[1] & kLow6;
    u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kTop2) << 4);
    u[2] = mins_lo;
    u[0] &= kLow6;
    const __m512i scales16 = _mm512_broadcast_i32x4(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(u[1]), static_cast<int>(u[0]))));
    const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(u[3]), static_cast<int>(u[2]));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    __m512i qh2 = _mm512_setzero_si512();
    if constexpr (kFifthBit) qh2 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    const BlockQ8_K& at = a[i];
    __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
      __m512i q = _mm512_and_si512(_mm512_srlv_epi64(packed, nibble_shift), low_mask);
      if constexpr (kFifthBit) {
        q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh2, qh_shift[c]), one), 4));
      }
      const __m512i av = _mm512_loadu_si512(at.qs + 64 * c);
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q, av),
                                 _mm512_shuffle_epi8(scales16, scale_index[c]));
    }
    const __m256i sum8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
    const __m256i summ = _mm256_madd_epi16(bsums, mins16);
    const float wd = HalfToFloat(b.d), wdmin = HalfToFloat(b.dmin);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(at.d * wd), _mm256_cvtepi32_ps(sum8), acc);
    acc = _mm256_fnmadd_ps(_mm256_set1_ps(at.d * wdmin), _mm256_cvtepi32_ps(summ), acc);
  }
  return HorizontalSum(acc);
}

__attribute__((target(TANDEM_AVX512_TARGET))) float DotQ6_KAvx512One(const void* w_row, const void* a_row,
                                                                     int64_t n_blocks) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  const __m512i two_bits = _mm512_set1_epi8(0x03);
  // Bits 0-1 / 2-3 of qh for values k = 0 / 1 (pair A), bits 4-5 / 6-7 for k = 2 / 3 (pair B).
  const __m512i qh_shift_a = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const __m512i qh_shift_b = _mm512_set_epi64(6, 6, 6, 6, 4, 4, 4, 4);
  // Register j holds the AVX2 path's v[2j] and v[2j + 1]: 128-bit lane L takes scale 4j + L.
  __m512i scale_index[4];
  for (int j = 0; j < 4; ++j) {
    scale_index[j] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * j + 1)),
                                                _mm_set1_epi16(static_cast<int16_t>(4 * j)))),
        _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * j + 3)),
                         _mm_set1_epi16(static_cast<int16_t>(4 * j + 2))),
        1);
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;  // as DotQ6_KAvx2N
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    _mm_prefetch(ahead + 128, _MM_HINT_T0);
    _mm_prefetch(ahead + 192, _MM_HINT_T0);
    const BlockQ6_K& b = w[i];
    const BlockQ8_K& at = a[i];
    const __m256i scales16_256 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    const __m512i scales16 = _mm512_castsi256_si512(scales16_256);
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
    __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql01 = _mm512_loadu_si512(b.ql + 64 * h);  // [ql0 | ql1]
      const __m512i qh2 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i pair_a = _mm512_or_si512(
          _mm512_and_si512(ql01, low_mask),
          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh2, qh_shift_a), two_bits), 4));
      const __m512i pair_b = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi16(ql01, 4), low_mask),
          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh2, qh_shift_b), two_bits), 4));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(pair_a, _mm512_loadu_si512(at.qs + 128 * h)),
                                 _mm512_permutexvar_epi16(scale_index[2 * h], scales16));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(pair_b, _mm512_loadu_si512(at.qs + 128 * h + 64)),
                                 _mm512_permutexvar_epi16(scale_index[2 * h + 1], scales16));
    }
    // sum(scale[s] * bsums[s]) * 32 (the -32 offset), as DotQ6_KAvx2N starts from.
    __m256i sum8 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16_256), 5));
    sum8 = _mm256_add_epi32(sum8, _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(at.d * HalfToFloat(b.d)), _mm256_cvtepi32_ps(sum8), acc);
  }
  return HorizontalSum(acc);
}

// The avx512 K-quant dots on 2 * NP rows given as pointers.
template <int NP>
void KQuantDotAvx512(TensorType type, const void* w_row, const void* const* a_rows, int64_t n_blocks,
                     float* out) {
  const JoinedQ8K a{reinterpret_cast<const BlockQ8_K* const*>(a_rows)};
  if (type == TensorType::kQ4_K) return DotQ45_KAvx512<NP, BlockQ4_K>(w_row, a, n_blocks, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx512<NP, BlockQ5_K>(w_row, a, n_blocks, out);
  return DotQ6_KAvx512<NP>(w_row, a, n_blocks, out);
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

const bool kUseAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;
const bool kUseAvx512 = KernelIsaLevel() >= IsaLevel::kAvx512;

}  // namespace

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
    case TensorType::kQ4_K:
      return kUseAvx512 ? DotQ45_KAvx512One<BlockQ4_K>(w, a, cols / 256) : DotQ4_KAvx2(w, a, cols / 256);
    case TensorType::kQ6_K:
      return kUseAvx512 ? DotQ6_KAvx512One(w, a, cols / 256) : DotQ6_KAvx2(w, a, cols / 256);
    case TensorType::kQ5_K:
      return kUseAvx512 ? DotQ45_KAvx512One<BlockQ5_K>(w, a, cols / 256) : DotQ5_KAvx2(w, a, cols / 256);
    default: return VecDotQ8Reference(type, w, a, cols);
  }
}

bool HasMultiTokenDot(TensorType type) {
  return kUseAvx2 &&
         (type == TensorType::kQ4_K || type == TensorType::kQ5_K || type == TensorType::kQ6_K);
}

void VecDotQ8x4(TensorType type, const void* w_row, const void* const a_rows[4], int64_t cols, float out[4]) {
  if (!HasMultiTokenDot(type)) {  // below AVX2 (TANDEM_ISA=scalar too): the single-row dots
    for (int t = 0; t < 4; ++t) out[t] = VecDotQ8(type, w_row, a_rows[t], cols);
    return;
  }
  if (kUseAvx512) return KQuantDotAvx512<2>(type, w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ4_K) return DotQ45_KAvx2N<4, BlockQ4_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx2N<4, BlockQ5_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ6_K) return DotQ6_KAvx2N<4>(w_row, a_rows, cols / 256, out);
  for (int t = 0; t < 4; ++t) out[t] = VecDotQ8(type, w_row, a_rows[t], cols);
}

void VecDotQ8x8(TensorType type, const void* w_row, const void* const a_rows[8], int64_t cols, float out[8]) {
  if (kUseAvx512 && HasMultiTokenDot(type)) return KQuantDotAvx512<4>(type, w_row, a_rows, cols / 256, out);
  VecDotQ8x4(type, w_row, a_rows, cols, out);
  VecDotQ8x4(type, w_row, a_rows + 4, cols, out + 4);
}

bool HasPairedQ8KDot(TensorType type) { return kUseAvx512 && HasMultiTokenDot(type); }

void PairQ8KRows(const uint8_t* rows, int64_t row_bytes, int n_tokens, int64_t n_blocks,
                 PairedQ8K* out) {
  const int n_tp = (n_tokens + 1) / 2;
  out->n_blocks = n_blocks;
  out->n_token_pairs = n_tp;
  out->data.resize(static_cast<size_t>(n_tp * n_blocks * kPairedQ8KRecordBytes));
  for (int h = 0; h < n_tp; ++h) {
    const BlockQ8_K* t[2] = {reinterpret_cast<const BlockQ8_K*>(rows + 2 * h * row_bytes),
                             reinterpret_cast<const BlockQ8_K*>(
                                 rows + std::min(2 * h + 1, n_tokens - 1) * row_bytes)};
    for (int64_t i = 0; i < n_blocks; ++i) {
      uint8_t* rec = out->data.data() + (h * n_blocks + i) * kPairedQ8KRecordBytes;
      for (int k = 0; k < 2; ++k) {
        for (int c = 0; c < 8; ++c) std::memcpy(rec + 64 * c + 32 * k, t[k][i].qs + 32 * c, 32);
        std::memcpy(rec + 512 + 32 * k, t[k][i].bsums, 32);
        std::memcpy(rec + 576 + 4 * k, &t[k][i].d, 4);
      }
    }
  }
}

void VecDotQ8KPaired8(TensorType type, const void* w_row, const PairedQ8K& a, int h0, float out[8]) {
  TANDEM_CHECK(HasPairedQ8KDot(type) && h0 + 4 <= a.n_token_pairs);
  const PairedQ8KView v{a.data.data() + h0 * a.n_blocks * kPairedQ8KRecordBytes, a.n_blocks};
  if (type == TensorType::kQ4_K) return DotQ45_KAvx512<4, BlockQ4_K>(w_row, v, a.n_blocks, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx512<4, BlockQ5_K>(w_row, v, a.n_blocks, out);
  DotQ6_KAvx512<4>(w_row, v, a.n_blocks, out);
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
__attribute__((target("avx2,fma"))) void QuantizeQ8_KValuesAvx2(const float* x, float iscale,
                                                                BlockQ8_K& y) {
  const __m256 s = _mm256_set1_ps(iscale);
  const __m256i max_q = _mm256_set1_epi32(127);
  for (int g = 0; g < 8; ++g) {  // 32 values per step
    __m256i i[4];
    for (int k = 0; k < 4; ++k) {
      i[k] = _mm256_min_epi32(
          _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), s)), max_q);
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i sum8 = _mm256_add_epi32(i[2 * h], i[2 * h + 1]);
      __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0x4e));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0xb1));
      y.bsums[2 * g + h] = static_cast<int16_t>(_mm_cvtsi128_si32(sum4));
    }
    const __m256i b =
        _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
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
    if (kUseAvx2) {
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
