// The 256-bit kI8Rows kernels (i8_rows.h): the dots on ymm registers, 4 weight rows x 2
// tokens per pass over the columns, in three forms: plain AVX2 (activations + 128 and
// weights widened to int16, vpmaddwd), AVX-VNNI and the avx512 level's EVEX ymm form
// (vpdpbusd, activations + 128 unsigned against the weights as stored); each then takes
// 128 x the weight row's sum back out. Also the activation quantizer of every vector
// level, and the epilogue.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/i8_rows.h"
#include "kernels/i8_rows_internal.h"

namespace tandem {
namespace {

// [sum a, sum b, sum c, sum d] of four vectors of 8 int32 lanes (wrapping).
__attribute__((target("avx2"))) inline __m128i Sums4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// One step of 32 columns: acc[r][t] += the products of rows[r][k, k + 32) and
// x[t][xk, xk + 32) (activations + 128); with kInlineSums sums[r] += the weights.
template <VnniForm kForm, int kTokens, bool kInlineSums>
__attribute__((target("avx2,fma"), always_inline)) inline void StepYmm(
    __m256i (&acc)[4][kTokens], __m256i (&sums)[4], const int8_t* const rows[4], int64_t k,
    const uint8_t* const x[kTokens], int64_t xk) {
  if constexpr (kForm == VnniForm::kNone) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int h = 0; h < 32; h += 16) {
      __m256i w16[4];
      for (int r = 0; r < 4; ++r) {
        w16[r] = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + k + h)));
        if constexpr (kInlineSums)
          sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(w16[r], ones));
      }
      for (int t = 0; t < kTokens; ++t) {
        const __m256i u16 =
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[t] + xk + h)));
        for (int r = 0; r < 4; ++r)
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(w16[r], u16));
      }
    }
  } else {
    __m256i w8[4];
    for (int r = 0; r < 4; ++r) {
      w8[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + k));
      if constexpr (kInlineSums) sums[r] = DpBusd<kForm>(sums[r], _mm256_set1_epi8(1), w8[r]);
    }
    for (int t = 0; t < kTokens; ++t) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t] + xk));
      for (int r = 0; r < 4; ++r) acc[r][t] = DpBusd<kForm>(acc[r][t], xv, w8[r]);
    }
  }
}

// out[t * 4 + r] = dot(w[r], x[t] - 128) over cols columns, r < 4, t < kTokens;
// row_sums[4]: the rows' sums, given, or with kInlineSums taken in the same pass and
// stored there.
template <VnniForm kForm, int kTokens, bool kInlineSums>
__attribute__((target("avx2,fma"))) void DotsYmm4(const int8_t* const w[4],
                                                  const uint8_t* const x[kTokens],
                                                  int32_t* row_sums, int64_t cols, int32_t* out) {
  __m256i acc[4][kTokens], sums[4];
  for (int r = 0; r < 4; ++r) {
    sums[r] = _mm256_setzero_si256();
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_setzero_si256();
  }
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) StepYmm<kForm, kTokens, kInlineSums>(acc, sums, w, k, x, k);
  if (k < cols) {
    // The last columns from a zeroed copy: no byte past a row is read, and the zeros
    // meet whatever the activations hold there.
    alignas(32) int8_t tail[4][32] = {};
    const int8_t* rows[4];
    for (int r = 0; r < 4; ++r) {
      std::memcpy(tail[r], w[r] + k, static_cast<size_t>(cols - k));
      rows[r] = tail[r];
    }
    StepYmm<kForm, kTokens, kInlineSums>(acc, sums, rows, 0, x, k);
  }
  if constexpr (kInlineSums) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row_sums),
                     Sums4(sums[0], sums[1], sums[2], sums[3]));
  }
  // 128 * the row sums (wrapping)
  const __m128i corr =
      _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row_sums)), 7);
  for (int t = 0; t < kTokens; ++t) {
    const __m128i s = _mm_sub_epi32(Sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]), corr);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * t), s);
  }
}

template <VnniForm kForm>
void DotsYmm(const I8DotArgs& a) {
  // The weight row sums are taken with the first pair of tokens, and given to the others.
  thread_local std::vector<int32_t> block_sums;
  block_sums.resize(static_cast<size_t>(a.n_rows));
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += 2) {
    const int nt = a.n_tokens - t0 >= 2 ? 2 : 1;
    const uint8_t* x[2] = {a.x + t0 * a.x_stride, a.x + (t0 + nt - 1) * a.x_stride};
    const bool inline_sums = t0 == 0;
    ForEachRowGroup<4>(a.n_rows, a.runs, [&](const int64_t rows[4], int valid) {
      const int8_t* w[4];
      int32_t sums[4];
      for (int r = 0; r < 4; ++r) {
        w[r] = a.w + rows[r] * a.row_bytes;
        sums[r] = inline_sums ? 0 : block_sums[static_cast<size_t>(rows[r])];
      }
      int32_t out[2 * 4];
      if (inline_sums) {
        if (nt == 2) {
          DotsYmm4<kForm, 2, true>(w, x, sums, a.cols, out);
        } else {
          DotsYmm4<kForm, 1, true>(w, x, sums, a.cols, out);
        }
      } else if (nt == 2) {
        DotsYmm4<kForm, 2, false>(w, x, sums, a.cols, out);
      } else {
        DotsYmm4<kForm, 1, false>(w, x, sums, a.cols, out);
      }
      if (inline_sums) {
        for (int r = 0; r < 4; ++r) block_sums[static_cast<size_t>(rows[r])] = sums[r];
      }
      for (int t = 0; t < nt; ++t) {
        for (int r = 0; r < valid; ++r) a.dots[(t0 + t) * a.dots_stride + rows[r]] = out[4 * t + r];
      }
    });
  }
}

// 32 int32 lanes (each in [-128, 127]) -> 32 bytes in order.
__attribute__((target("avx2"))) inline __m256i PackToBytes(__m256i a, __m256i b, __m256i c,
                                                           __m256i d) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// q8 of i8_rows.h on 8 lanes: RoundToInt8's steps (the current rounding mode, as
// nearbyint; then max(v, -128) and min(v, 127), NaN to -128), as int32.
__attribute__((target("avx2"))) inline __m256i RoundToInt8x8(__m256 v) {
  __m256 r = _mm256_round_ps(v, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
  r = _mm256_max_ps(r, _mm256_set1_ps(-128.0f));
  r = _mm256_min_ps(r, _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(r);
}

}  // namespace

void I8DotsYmm(VnniForm form, const I8DotArgs& a) {
  switch (form) {
    case VnniForm::kNone:
      return DotsYmm<VnniForm::kNone>(a);
    case VnniForm::kVex:
      return DotsYmm<VnniForm::kVex>(a);
    case VnniForm::kEvex:
      return DotsYmm<VnniForm::kEvex>(a);
  }
}

__attribute__((target("avx2,fma"))) void I8FinishAvx2(const I8FinishArgs& a) { I8FinishRows(a); }

__attribute__((target("avx2,fma"))) void QuantizeI8RowAvx2(const float* x, int64_t cols,
                                                           float act_scale, float act_offset,
                                                           uint8_t* u, float* s_t) {
  std::memset(u + cols, 128, static_cast<size_t>(I8RowStride(cols) - cols));
  const __m256i flip = _mm256_set1_epi8(-128);
  const int64_t full = cols / 32 * 32;
  if (act_scale > 0) {
    *s_t = 0;
    const __m256 vs = _mm256_set1_ps(act_scale), vo = _mm256_set1_ps(act_offset);
    for (int64_t k = 0; k < full; k += 32) {
      __m256i v[4];
      for (int j = 0; j < 4; ++j) {
        v[j] = RoundToInt8x8(_mm256_add_ps(_mm256_div_ps(_mm256_loadu_ps(x + k + 8 * j), vs), vo));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + k),
                          _mm256_xor_si256(PackToBytes(v[0], v[1], v[2], v[3]), flip));
    }
    for (int64_t k = full; k < cols; ++k)
      u[k] = static_cast<uint8_t>(RoundToInt8(x[k] / act_scale + act_offset) ^ 0x80);
    return;
  }
  // max |x|: exact in any order; _mm256_max_ps(v, m) keeps m where v is NaN, as the
  // scalar loop does.
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int64_t k = 0; k + 8 <= cols; k += 8)
    m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = 0;
  for (float v : lanes) amax = v > amax ? v : amax;
  for (int64_t k = cols / 8 * 8; k < cols; ++k) {
    const float v = __builtin_fabsf(x[k]);
    amax = v > amax ? v : amax;
  }
  *s_t = amax / 127.0f;
  if (amax == 0) {
    std::memset(u, 128, static_cast<size_t>(cols));
    return;
  }
  const float inv = 127.0f / amax;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t k = 0; k < full; k += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j)
      v[j] = RoundToInt8x8(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * j), vinv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + k),
                        _mm256_xor_si256(PackToBytes(v[0], v[1], v[2], v[3]), flip));
  }
  for (int64_t k = full; k < cols; ++k) u[k] = static_cast<uint8_t>(RoundToInt8(x[k] * inv) ^ 0x80);
}

}  // namespace tandem
