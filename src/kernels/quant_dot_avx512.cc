// The K-quant dots at the avx512 level (AVX-512 F/BW/VL/VNNI): the AVX2 kernels' integers
// and float steps (quant_dot.cc) two vectors per register; the same bits. See quant_dot.h.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/logging.h"
#include "kernels/dequant.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

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
  float D0(int h, int64_t i) const { return a[2 * h][i].d; }
  float D1(int h, int64_t i) const { return a[2 * h + 1][i].d; }
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
    return ScalarHalves(D0(h, i), D1(h, i));
  }
  float D0(int h, int64_t i) const {
    float d;
    std::memcpy(&d, Record(h, i) + 576, sizeof(d));
    return d;
  }
  float D1(int h, int64_t i) const {
    float d;
    std::memcpy(&d, Record(h, i) + 580, sizeof(d));
    return d;
  }
};

// D(h, i) x the weight's scale per half: [d0 * wd | d1 * wd], the products the AVX2 path
// forms in scalar floats (the same roundings).
template <int NP, typename Block, typename Src>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ45_KAvx512(const void* w_row, const Src& a,
                                                                  int64_t n_blocks, float* out) {
  constexpr bool kLlamaOrder = std::is_same_v<Block, BlockQ4_K>;  // as DotQ45_KAvx2N
  const Block* w = static_cast<const Block*>(w_row);
  __m512 acc[NP];
  float summs[2 * NP] = {};
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
    const __m512 w_scales = _mm512_shuffle_ps(wd, wdmin, _MM_SHUFFLE(0, 0, 0, 0));  // [wd wd wdmin wdmin]
#pragma GCC unroll 4
    for (int h = 0; h < NP; ++h) {
      const __m512i summ = _mm512_madd_epi16(a.Bsums(h, i), mins2);
      __m512i sumi = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(lo2[c], a.Qs(h, i, 2 * c)), sc_lo2[c]);
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(hi2[c], a.Qs(h, i, 2 * c + 1)), sc_hi2[c]);
      }
      const __m512 d = a.D(h, i);
      if constexpr (kLlamaOrder) {
        acc[h] = Q4_KLlamaStepHalves(sumi, summ, _mm512_mul_ps(w_scales, d), acc[h]);
      } else {
        acc[h] = _mm512_fmadd_ps(_mm512_mul_ps(d, wd), _mm512_cvtepi32_ps(sumi), acc[h]);
        const float dmin_w = HalfToFloat(w[i].dmin);
        summs[2 * h] += (-a.D0(h, i) * dmin_w) * static_cast<float>(SumLanes(_mm512_castsi512_si256(summ)));
        summs[2 * h + 1] += (-a.D1(h, i) * dmin_w) * static_cast<float>(SumLanes(_mm512_extracti64x4_epi64(summ, 1)));
      }
    }
  }
  for (int h = 0; h < NP; ++h) {
    if constexpr (kLlamaOrder) {
      Q4_KLlamaResultHalves(acc[h], &out[2 * h], &out[2 * h + 1]);
    } else {
      HalfSums(acc[h], &out[2 * h], &out[2 * h + 1]);
      out[2 * h] += summs[2 * h];
      out[2 * h + 1] += summs[2 * h + 1];
    }
  }
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
// AVX2 path's on the folded 8 lanes, so the bits are the same. Q4_K's order needs only each
// super-block's two integer totals, which it forms with fewer multiplies (below).
template <typename Block>
__attribute__((target(TANDEM_AVX512_TARGET))) float DotQ45_KAvx512One(const void* w_row, const void* a_row,
                                                                      int64_t n_blocks) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  constexpr bool kLlamaOrder = std::is_same_v<Block, BlockQ4_K>;  // as DotQ45_KAvx2N
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
  // For the packed pairs (Q4_K): in 128-bit lane k, words 0..3 take scale s0 + k / 2 and
  // words 4..7 scale s0 + 2 + k / 2, with s0 = 0 for the first pair, 4 for the second.
  __m512i packed_scale_index[2];
  for (int j = 0; j < 2; ++j) {
    alignas(64) int16_t index[32];
    for (int k = 0; k < 4; ++k) {
      for (int word = 0; word < 8; ++word) {
        const int scale = 4 * j + (word < 4 ? 0 : 2) + k / 2;
        index[8 * k + word] = static_cast<int16_t>(0x0100 * (2 * scale + 1) + 2 * scale);
      }
    }
    packed_scale_index[j] = _mm512_load_si512(index);
  }
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_llama = _mm_setzero_ps();
  __m256i pending_sumi = _mm256_setzero_si256(), pending_summ = _mm256_setzero_si256();
  __m128 pending_scale = _mm_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;  // as DotQ45_KAvx2N
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    _mm_prefetch(ahead + 128, _MM_HINT_T0);
    const Block& b = w[i];
    const __m128i scales_mins = UnpackScalesMinsK4(b.scales);
    const __m512i scales16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scales_mins));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scales_mins, scales_mins));
    __m512i qh2 = _mm512_setzero_si512();
    if constexpr (kFifthBit) qh2 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    const BlockQ8_K& at = a[i];
    __m512i sumi = _mm512_setzero_si512();
    if constexpr (kLlamaOrder) {
      // Only the block's total isum counts here (Q4_KLlamaStep folds every lane), so the
      // integers may take any grouping: vpdpbusd sums each 4 values x activations (at
      // most 4 * 15 * 128 in magnitude, an int16), two such registers pack into one of
      // int16 (their words pair within a sub-block) and one vpdpwssd applies the scales:
      // 6 multiplies per super-block instead of 8, the nibbles split on 256-bit halves.
      __m512i part[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
        const __m256i lo = _mm256_and_si256(packed, _mm512_castsi512_si256(low_mask));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), _mm512_castsi512_si256(low_mask));
        part[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                      _mm512_loadu_si512(at.qs + 64 * c));
      }
      // 128-bit lane k of packs(part[c], part[c + 1]): words 0..3 of sub-block 2c + k / 2,
      // words 4..7 of sub-block 2c + 2 + k / 2.
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(part[0], part[1]),
                                 _mm512_shuffle_epi8(scales16, packed_scale_index[0]));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(part[2], part[3]),
                                 _mm512_shuffle_epi8(scales16, packed_scale_index[1]));
    } else {
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
    }
    const __m256i sum8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.bsums));
    const __m256i summ = _mm256_madd_epi16(bsums, mins16);
    if constexpr (kLlamaOrder) {
      // Two super-blocks share one fold: the first's sums wait in pending_* (exact
      // integers), then both become [isum0, imin0, isum1, imin1] and take their two fmas
      // in block order. d and dmin are adjacent halves: [wd, wdmin, wd, wdmin].
      static_assert(offsetof(Block, dmin) == sizeof(b.d));
      int32_t d_dmin;
      std::memcpy(&d_dmin, &b.d, sizeof(d_dmin));
      const __m128 w2 = _mm_cvtph_ps(_mm_cvtsi32_si128(d_dmin));
      const __m128 scale = Q4_KLlamaScale(_mm_movelh_ps(w2, w2), at.d);
      if (i % 2 == 0 && i + 1 < n_blocks) {
        pending_sumi = sum8;
        pending_summ = summ;
        pending_scale = scale;
        continue;
      }
      if (i % 2 == 1) {
        const __m256i x = _mm256_hadd_epi32(pending_sumi, pending_summ);
        const __m256i y = _mm256_hadd_epi32(sum8, summ);
        const __m256i z = _mm256_hadd_epi32(x, y);  // [s0 m0 s1 m1 | s0' m0' s1' m1'] partials
        const __m128 both = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(z), _mm256_extracti128_si256(z, 1)));
        acc_llama = _mm_fmadd_ps(both, pending_scale, acc_llama);
        acc_llama = _mm_fmadd_ps(_mm_movehl_ps(both, both), scale, acc_llama);
      } else {
        acc_llama = Q4_KLlamaStep(sum8, summ, scale, acc_llama);
      }
    } else {
      const float wd = HalfToFloat(b.d), wdmin = HalfToFloat(b.dmin);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(at.d * wd), _mm256_cvtepi32_ps(sum8), acc);
      summs += (-at.d * wdmin) * static_cast<float>(SumLanes(summ));
    }
  }
  return kLlamaOrder ? Q4_KLlamaResult(acc_llama) : HorizontalSum(acc) + summs;
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
void KQuantDotAvx512N(TensorType type, const void* w_row, const void* const* a_rows, int64_t n_blocks,
                     float* out) {
  const JoinedQ8K a{reinterpret_cast<const BlockQ8_K* const*>(a_rows)};
  if (type == TensorType::kQ4_K) return DotQ45_KAvx512<NP, BlockQ4_K>(w_row, a, n_blocks, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx512<NP, BlockQ5_K>(w_row, a, n_blocks, out);
  return DotQ6_KAvx512<NP>(w_row, a, n_blocks, out);
}

}  // namespace

void KQuantDotAvx512(int pairs, TensorType type, const void* w_row, const void* const* a_rows, int64_t n_blocks,
                     float* out) {
  TANDEM_CHECK(pairs == 2 || pairs == 4) << "token pairs: " << pairs;
  return pairs == 2 ? KQuantDotAvx512N<2>(type, w_row, a_rows, n_blocks, out)
                    : KQuantDotAvx512N<4>(type, w_row, a_rows, n_blocks, out);
}

float KQuantDotAvx512One(TensorType type, const void* w_row, const void* a_row, int64_t n_blocks) {
  if (type == TensorType::kQ4_K) return DotQ45_KAvx512One<BlockQ4_K>(w_row, a_row, n_blocks);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx512One<BlockQ5_K>(w_row, a_row, n_blocks);
  TANDEM_CHECK(type == TensorType::kQ6_K) << "no avx512 K-quant dot for type " << static_cast<int>(type);
  return DotQ6_KAvx512One(w_row, a_row, n_blocks);
}

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

namespace {

template <int NP>
void DotPairedQ8K(TensorType type, const void* w_row, const PairedQ8KView& v, int64_t n_blocks, float* out) {
  if (type == TensorType::kQ4_K) return DotQ45_KAvx512<NP, BlockQ4_K>(w_row, v, n_blocks, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx512<NP, BlockQ5_K>(w_row, v, n_blocks, out);
  DotQ6_KAvx512<NP>(w_row, v, n_blocks, out);
}

}  // namespace

void VecDotQ8KPaired8(TensorType type, const void* w_row, const PairedQ8K& a, int h0, float out[8]) {
  VecDotQ8KPaired(type, w_row, a, h0, 4, out);
}

void VecDotQ8KPaired(TensorType type, const void* w_row, const PairedQ8K& a, int h0, int n_pairs, float* out) {
  TANDEM_CHECK(HasPairedQ8KDot(type) && n_pairs >= 1 && n_pairs <= 4 && h0 + n_pairs <= a.n_token_pairs);
  const PairedQ8KView v{a.data.data() + h0 * a.n_blocks * kPairedQ8KRecordBytes, a.n_blocks};
  switch (n_pairs) {
    case 1:
      return DotPairedQ8K<1>(type, w_row, v, a.n_blocks, out);
    case 2:
      return DotPairedQ8K<2>(type, w_row, v, a.n_blocks, out);
    case 3:
      return DotPairedQ8K<3>(type, w_row, v, a.n_blocks, out);
    default:
      return DotPairedQ8K<4>(type, w_row, v, a.n_blocks, out);
  }
}

}  // namespace tandem
