// The kI8Rows dots at the avx512 level (i8_rows.h): vpdpbusd on zmm registers, 64
// columns per instruction, 4 weight rows x 4 tokens per pass over the columns (16
// accumulators; fewer tokens: 4 x 2, 4 x 1). The activations go in as prepared (xq + 128,
// unsigned) against the weights as stored, and 128 x the weight row's sum comes back out
// of each dot: the integers of the other kernels exactly.
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/i8_rows.h"
#include "kernels/i8_rows_internal.h"

namespace tandem {
namespace {

// The 16 lane sums of v[0..15] in one register, v[4 * r + t] at lane 4 * t + r: four
// rounds of adding register halves (512 -> 256 -> 128-bit halves, then 64 and 32-bit
// lanes), each round pairing registers so no add is wasted (15 adds for 16 sums).
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m512i Sums16(const __m512i v[16]) {
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) {  // a[i]: 128-bit lanes [v2i: 0+2, 1+3 | v2i+1: 0+2, 1+3]
    a[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int j = 0; j < 4; ++j) {  // b[j]: 128-bit lane l holds 4 partial sums of v[4j + l]
    b[j] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int m = 0; m < 2; ++m) {  // c[m], lane l: [v(8m+l), v(8m+4+l), v(8m+l), v(8m+4+l)] halves
    c[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(b[2 * m], b[2 * m + 1]),
                            _mm512_unpackhi_epi32(b[2 * m], b[2 * m + 1]));
  }
  // lane 4l + j: v[4j + l]
  return _mm512_add_epi32(_mm512_unpacklo_epi64(c[0], c[1]), _mm512_unpackhi_epi64(c[0], c[1]));
}

// acc + per int32 lane the sum of 4 products of unsigned bytes u and signed bytes s.
// Inline assembly: GCC 12 copies each accumulator through another register around the
// intrinsic's vpdpbusd (I8RowsProduct, 1536 x 1536 at 512 tokens: half the speed).
__attribute__((target(TANDEM_AVX512_TARGET), always_inline)) inline __m512i DpBusdZmm(__m512i acc,
                                                                                      __m512i u,
                                                                                      __m512i s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
}

// acc[r][t] += the products of the 64 columns w[r] and x[t][k, k + 64) (activations
// + 128); with kInlineSums sums[r] += the weights.
template <int kTokens, bool kInlineSums>
__attribute__((target(TANDEM_AVX512_TARGET), always_inline)) inline void StepZmm(
    __m512i (&acc)[4][kTokens], __m512i (&sums)[4], const __m512i w[4],
    const uint8_t* const x[kTokens], int64_t k) {
  if constexpr (kInlineSums) {
    for (int r = 0; r < 4; ++r) sums[r] = DpBusdZmm(sums[r], _mm512_set1_epi8(1), w[r]);
  }
  for (int t = 0; t < kTokens; ++t) {
    const __m512i xv = _mm512_loadu_si512(x[t] + k);
    for (int r = 0; r < 4; ++r) acc[r][t] = DpBusdZmm(acc[r][t], xv, w[r]);
  }
}

// [sum v0, sum v1, sum v2, sum v3] (lanes, wrapping): Sums16's first two rounds, then
// the 128-bit lanes added within.
__attribute__((target(TANDEM_AVX512_TARGET))) inline __m128i Sums4(__m512i v0, __m512i v1,
                                                                   __m512i v2, __m512i v3) {
  const __m512i a0 = _mm512_add_epi32(_mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(1, 0, 1, 0)),
                                      _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512i a1 = _mm512_add_epi32(_mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(1, 0, 1, 0)),
                                      _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(3, 2, 3, 2)));
  // 128-bit lane l: 4 partial sums of v_l
  __m512i b = _mm512_add_epi32(_mm512_shuffle_i32x4(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_i32x4(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)));
  b = _mm512_add_epi32(b, _mm512_shuffle_epi32(b, _MM_PERM_BADC));
  b = _mm512_add_epi32(b, _mm512_shuffle_epi32(b, _MM_PERM_CDAB));
  return _mm512_castsi512_si128(_mm512_permutexvar_epi32(
      _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), b));
}

// out[t * 4 + r] = dot(w[r], x[t] - 128) over cols columns, r < 4, t < kTokens;
// row_sums[4]: the rows' sums, given, or with kInlineSums taken in the same pass and
// stored there.
template <int kTokens, bool kInlineSums>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotsZmm4(const int8_t* const w[4],
                                                            const uint8_t* const x[kTokens],
                                                            int32_t* row_sums, int64_t cols,
                                                            int32_t* out) {
  __m512i acc[4][kTokens], sums[4];
  for (int r = 0; r < 4; ++r) {
    sums[r] = _mm512_setzero_si512();
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_si512();
  }
  int64_t k = 0;
  for (; k + 64 <= cols; k += 64) {
    __m512i wv[4];
    for (int r = 0; r < 4; ++r) wv[r] = _mm512_loadu_si512(w[r] + k);
    StepZmm<kTokens, kInlineSums>(acc, sums, wv, x, k);
  }
  if (k < cols) {
    // Masked loads: no byte past a row is read (a masked-off byte cannot fault), and the
    // zeros meet whatever the activations hold there.
    const __mmask64 m = ~uint64_t{0} >> (64 - (cols - k));
    __m512i wv[4];
    for (int r = 0; r < 4; ++r) wv[r] = _mm512_maskz_loadu_epi8(m, w[r] + k);
    StepZmm<kTokens, kInlineSums>(acc, sums, wv, x, k);
  }
  if constexpr (kTokens <= 2 && kInlineSums) {
    // The sums are linear: each dot's 128 * row sum comes out lane by lane before the one
    // horizontal sum (a token or two: decode, whose rows no later token group takes).
    for (int t = 0; t < kTokens; ++t) {
      __m512i d[4];
      for (int r = 0; r < 4; ++r) d[r] = _mm512_sub_epi32(acc[r][t], _mm512_slli_epi32(sums[r], 7));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * t), Sums4(d[0], d[1], d[2], d[3]));
    }
    return;
  }
  if constexpr (kInlineSums) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row_sums),
                     Sums4(sums[0], sums[1], sums[2], sums[3]));
  }
  const __m128i rs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row_sums));
  if constexpr (kTokens == 4) {
    __m512i v[16];
    for (int r = 0; r < 4; ++r) {
      for (int t = 0; t < 4; ++t) v[4 * r + t] = acc[r][t];
    }
    // lane 4t + r: 128 * rs[r]
    const __m512i corr = _mm512_slli_epi32(_mm512_broadcast_i32x4(rs), 7);
    _mm512_storeu_si512(out, _mm512_sub_epi32(Sums16(v), corr));
  } else {
    const __m128i corr = _mm_slli_epi32(rs, 7);
    for (int t = 0; t < kTokens; ++t) {
      const __m128i s = Sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * t), _mm_sub_epi32(s, corr));
    }
  }
}

// Every row group of the block against tokens x[0, kTokens) (t0 on: the first nt kept);
// block_sums[n_rows]: the rows' sums, taken here with kInlineSums.
template <int kTokens, bool kInlineSums>
void RowGroupsZmm(const I8DotArgs& a, int64_t t0, int nt, const uint8_t* const x[4],
                  int32_t* block_sums) {
  ForEachRowGroup<4>(a.n_rows, a.runs, [&](const int64_t rows[4], int valid) {
    const int8_t* w[4];
    int32_t sums[4];
    for (int r = 0; r < 4; ++r) {
      w[r] = a.w + rows[r] * a.row_bytes;
      sums[r] = kInlineSums ? 0 : block_sums[rows[r]];
    }
    int32_t out[4 * 4];
    DotsZmm4<kTokens, kInlineSums>(w, x, sums, a.cols, out);
    if constexpr (kInlineSums && kTokens == 4) {
      for (int r = 0; r < 4; ++r) block_sums[rows[r]] = sums[r];
    }
    for (int t = 0; t < nt; ++t) {
      for (int r = 0; r < valid; ++r) a.dots[(t0 + t) * a.dots_stride + rows[r]] = out[4 * t + r];
    }
  });
}

}  // namespace

void I8DotsAvx512(const I8DotArgs& a) {
  // The weight row sums are taken with the first group of tokens (4 more vpdpbusd per
  // 16), and given to the others (one or two tokens: a single group).
  thread_local std::vector<int32_t> block_sums;
  block_sums.resize(static_cast<size_t>(a.n_rows));
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += 4) {
    const int64_t left = a.n_tokens - t0;
    const int nt = left >= 4 ? 4 : static_cast<int>(left);
    const uint8_t* x[4];
    for (int t = 0; t < 4; ++t) x[t] = a.x + (t0 + (t < nt ? t : nt - 1)) * a.x_stride;
    int32_t* sums = block_sums.data();
    if (t0 == 0) {
      if (nt >= 3) {  // 3 tokens: the 4-token kernel, the last repeated
        RowGroupsZmm<4, true>(a, t0, nt, x, sums);
      } else if (nt == 2) {
        RowGroupsZmm<2, true>(a, t0, nt, x, sums);
      } else {
        RowGroupsZmm<1, true>(a, t0, nt, x, sums);
      }
    } else if (nt >= 3) {
      RowGroupsZmm<4, false>(a, t0, nt, x, sums);
    } else if (nt == 2) {
      RowGroupsZmm<2, false>(a, t0, nt, x, sums);
    } else {
      RowGroupsZmm<1, false>(a, t0, nt, x, sums);
    }
  }
}

__attribute__((target(TANDEM_AVX512_TARGET))) void I8FinishAvx512(const I8FinishArgs& a) {
  I8FinishRows(a);
}

}  // namespace tandem
