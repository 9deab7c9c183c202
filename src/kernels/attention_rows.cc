#include "kernels/attention_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/half.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

#define TANDEM_AVX2 __attribute__((target("avx2,fma,f16c")))

// Head readers: H(row, hd).Load(d) is values d .. d + 7 of the head in float, exactly
// DecodeKvHead's values (kv_dtype.h).
struct F16Head {
  static constexpr KvDtype kDtype = KvDtype::kF16;
  const uint16_t* p;
  TANDEM_AVX2 F16Head(const void* head, int) : p(static_cast<const uint16_t*>(head)) {}
  TANDEM_AVX2 __m256 Load(int d) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d)));
  }
};

struct Bf16Head {
  static constexpr KvDtype kDtype = KvDtype::kBf16;
  const uint16_t* p;
  TANDEM_AVX2 Bf16Head(const void* head, int) : p(static_cast<const uint16_t*>(head)) {}
  TANDEM_AVX2 __m256 Load(int d) const {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
};

// fp8 codes widened into fp16 bits, then times the head's multiplier (stored after
// the hd codes).
template <bool kE4M3>
struct Fp8Head {
  static constexpr KvDtype kDtype = kE4M3 ? KvDtype::kFp8E4M3 : KvDtype::kFp8E5M2;
  const uint8_t* p;
  float m;
  TANDEM_AVX2 Fp8Head(const void* head, int hd) : p(static_cast<const uint8_t*>(head)) {
    std::memcpy(&m, p + hd, sizeof m);
  }
  TANDEM_AVX2 __m256 Load(int d) const {
    __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + d)));
    if (kE4M3) {
      w = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8),
                       _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7f)), 7));
    } else {
      w = _mm_slli_epi16(w, 8);
    }
    return _mm256_mul_ps(_mm256_cvtph_ps(w), _mm256_set1_ps(m));
  }
};

TANDEM_AVX2 inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Preconditions: hd % 8 == 0.
template <typename H, typename P>
TANDEM_AVX2 void DotRowsAvx2(const float* q, const P* const* k, int64_t n, int hd, float scale,
                             float* scores) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const H k0(k[j], hd), k1(k[j + 1], hd), k2(k[j + 2], hd), k3(k[j + 3], hd);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
           a3 = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qv, k0.Load(d), a0);
      a1 = _mm256_fmadd_ps(qv, k1.Load(d), a1);
      a2 = _mm256_fmadd_ps(qv, k2.Load(d), a2);
      a3 = _mm256_fmadd_ps(qv, k3.Load(d), a3);
    }
    scores[j] = Hsum(a0) * scale;
    scores[j + 1] = Hsum(a1) * scale;
    scores[j + 2] = Hsum(a2) * scale;
    scores[j + 3] = Hsum(a3) * scale;
  }
  for (; j < n; ++j) {
    const H k0(k[j], hd);
    __m256 a0 = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), k0.Load(d), a0);
    scores[j] = Hsum(a0) * scale;
  }
}

// Preconditions: hd % 8 == 0.
template <typename H, typename P>
TANDEM_AVX2 void WeightedSumRowsAvx2(const float* p, const P* const* v, int64_t n, int hd,
                                     float* out) {
  int d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) {
    __m256 acc[8];
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const H row(v[j], hd);
      for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(pj, row.Load(d0 + 8 * c), acc[c]);
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + d0 + 8 * c, acc[c]);
  }
  for (; d0 < hd; d0 += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), H(v[j], hd).Load(d0), acc);
    _mm256_storeu_ps(out + d0, acc);
  }
}

// Up to four heads against two keys per pass; each (head, key) sum runs over d in the
// order DotRowsAvx2 uses, so the bits match it. Preconditions: hd % 8 == 0, G <= 4.
template <typename H, int G, typename P>
TANDEM_AVX2 void DotRowsGroupAvx2(const float* const* q, const P* const* k, int64_t n, int hd,
                                  float scale, float* const* scores) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const H r0(k[j], hd), r1(k[j + 1], hd);
    __m256 a0[G], a1[G];
    for (int h = 0; h < G; ++h) a0[h] = a1[h] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 k0 = r0.Load(d), k1 = r1.Load(d);
      for (int h = 0; h < G; ++h) {
        const __m256 qv = _mm256_loadu_ps(q[h] + d);
        a0[h] = _mm256_fmadd_ps(qv, k0, a0[h]);
        a1[h] = _mm256_fmadd_ps(qv, k1, a1[h]);
      }
    }
    for (int h = 0; h < G; ++h) {
      scores[h][j] = Hsum(a0[h]) * scale;
      scores[h][j + 1] = Hsum(a1[h]) * scale;
    }
  }
  for (; j < n; ++j) {
    const H r0(k[j], hd);
    __m256 a0[G];
    for (int h = 0; h < G; ++h) a0[h] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 k0 = r0.Load(d);
      for (int h = 0; h < G; ++h) a0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + d), k0, a0[h]);
    }
    for (int h = 0; h < G; ++h) scores[h][j] = Hsum(a0[h]) * scale;
  }
}

// A 16-wide slice of up to four heads' outputs in registers across all rows; each output
// element is the same fma chain over j as in WeightedSumRowsAvx2.
// Preconditions: hd % 16 == 0, G <= 4.
template <typename H, int G, typename P>
TANDEM_AVX2 void WeightedSumRowsGroupAvx2(const float* const* p, const P* const* v, int64_t n,
                                          int hd, float* const* out) {
  for (int d0 = 0; d0 < hd; d0 += 16) {
    __m256 acc[G][2];
    for (int h = 0; h < G; ++h) acc[h][0] = acc[h][1] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      const H row(v[j], hd);
      const __m256 v0 = row.Load(d0), v1 = row.Load(d0 + 8);
      for (int h = 0; h < G; ++h) {
        const __m256 pj = _mm256_set1_ps(p[h][j]);
        acc[h][0] = _mm256_fmadd_ps(pj, v0, acc[h][0]);
        acc[h][1] = _mm256_fmadd_ps(pj, v1, acc[h][1]);
      }
    }
    for (int h = 0; h < G; ++h) {
      _mm256_storeu_ps(out[h] + d0, acc[h][0]);
      _mm256_storeu_ps(out[h] + d0 + 8, acc[h][1]);
    }
  }
}

const bool kHaveAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;

// The scalar paths: each row widened by DecodeKvHeadScalar, then a multiply and an add
// per value in index order.
template <typename H, typename P>
void DotRows(const float* q, const P* const* k, int64_t n, int hd, float scale, float* scores) {
  if (kHaveAvx2 && hd % 8 == 0) return DotRowsAvx2<H>(q, k, n, hd, scale, scores);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(hd));
  for (int64_t j = 0; j < n; ++j) {
    DecodeKvHeadScalar(H::kDtype, reinterpret_cast<const uint8_t*>(k[j]), hd, row.data());
    float sum = 0;
    for (int d = 0; d < hd; ++d) sum += q[d] * row[d];
    scores[j] = sum * scale;
  }
}

template <typename H, typename P>
void WeightedSumRows(const float* p, const P* const* v, int64_t n, int hd, float* out) {
  if (kHaveAvx2 && hd % 8 == 0) return WeightedSumRowsAvx2<H>(p, v, n, hd, out);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(hd));
  std::fill(out, out + hd, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    DecodeKvHeadScalar(H::kDtype, reinterpret_cast<const uint8_t*>(v[j]), hd, row.data());
    for (int d = 0; d < hd; ++d) out[d] += p[j] * row[d];
  }
}

template <typename H, typename P>
void DotRowsGroup(const float* const* q, int g, const P* const* k, int64_t n, int hd, float scale,
                  float* const* scores) {
  for (int h0 = 0; h0 < g; h0 += 4) {
    const int m = std::min(4, g - h0);
    if (!kHaveAvx2 || hd % 8 != 0) {
      for (int h = h0; h < h0 + m; ++h) DotRows<H>(q[h], k, n, hd, scale, scores[h]);
    } else if (m == 4) {
      DotRowsGroupAvx2<H, 4>(q + h0, k, n, hd, scale, scores + h0);
    } else if (m == 3) {
      DotRowsGroupAvx2<H, 3>(q + h0, k, n, hd, scale, scores + h0);
    } else if (m == 2) {
      DotRowsGroupAvx2<H, 2>(q + h0, k, n, hd, scale, scores + h0);
    } else {
      DotRowsGroupAvx2<H, 1>(q + h0, k, n, hd, scale, scores + h0);
    }
  }
}

template <typename H, typename P>
void WeightedSumRowsGroup(const float* const* p, int g, const P* const* v, int64_t n, int hd,
                          float* const* out) {
  for (int h0 = 0; h0 < g; h0 += 4) {
    const int m = std::min(4, g - h0);
    if (!kHaveAvx2 || hd % 16 != 0) {
      for (int h = h0; h < h0 + m; ++h) WeightedSumRows<H>(p[h], v, n, hd, out[h]);
    } else if (m == 4) {
      WeightedSumRowsGroupAvx2<H, 4>(p + h0, v, n, hd, out + h0);
    } else if (m == 3) {
      WeightedSumRowsGroupAvx2<H, 3>(p + h0, v, n, hd, out + h0);
    } else if (m == 2) {
      WeightedSumRowsGroupAvx2<H, 2>(p + h0, v, n, hd, out + h0);
    } else {
      WeightedSumRowsGroupAvx2<H, 1>(p + h0, v, n, hd, out + h0);
    }
  }
}

// ---- ggml_vec_dot_f16's order (llama.cpp's decode-path attention) ----
// One dot of n fp16-exact values x[i] * y[i] as ggml_vec_dot_f16 sums it on AVX2: four
// 8-lane float accumulators over steps of 32 (lane l of accumulator k takes the values
// 32 s + 8 k + l, one fma each), folded as x0 = (a0 + a2) + (a1 + a3), then the 128-bit
// halves added (lanes m and m + 4), then two horizontal adds; the last n % 32 products
// (each rounded to float) added in double. Element i of the operands: X(i), Y(i).
template <typename X, typename Y>
float GgmlDotF16Scalar(int64_t n, X x, Y y) {
  float a[4][8] = {};
  const int64_t np = n - n % 32;
  for (int64_t s = 0; s < np; s += 32) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 8; ++l) a[k][l] = std::fma(x(s + 8 * k + l), y(s + 8 * k + l), a[k][l]);
    }
  }
  float f[8];
  for (int l = 0; l < 8; ++l) f[l] = (a[0][l] + a[2][l]) + (a[1][l] + a[3][l]);
  float t[4];
  for (int m = 0; m < 4; ++m) t[m] = f[m] + f[m + 4];
  double sum = (t[0] + t[1]) + (t[2] + t[3]);
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(x(i) * y(i));
  return static_cast<float>(sum);
}

// The fold of GgmlDotF16Scalar on 8-lane vectors, lane by lane (lanes independent): the
// accumulators a[0..3] of 8 dots in the same lanes give their 8 results.
TANDEM_AVX2 inline __m256 GgmlFoldLanes(const __m256 a[4]) {
  return _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
}

TANDEM_AVX2 inline float GgmlHsum(__m256 f) {
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

#define TANDEM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

// out[h] = GgmlDot(x, y[h]) over n values for h < m (m <= 2): x fp16, y[h] float, x's
// loads shared by the heads. The last n % 32 values: with `padded`, one more step whose
// lanes past n are zero (a row padded with masked positions, as llama.cpp's kqv reads its
// 256-cell rows); else ggml's leftovers, each product added in double.
TANDEM_AVX2 void GgmlDotsAvx2(const uint16_t* x, const float* const* y, int m, int64_t n, bool padded, float* out) {
  const int64_t full = n - n % 32, rest = n - full;
  __m256 a[2][4];
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c) a[h][c] = _mm256_setzero_ps();
  for (int64_t s = 0; s < full; s += 32) {
    __m256 xv[4];
    for (int c = 0; c < 4; ++c) xv[c] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + s + 8 * c)));
    for (int h = 0; h < m; ++h) {
      for (int c = 0; c < 4; ++c) a[h][c] = _mm256_fmadd_ps(xv[c], _mm256_loadu_ps(y[h] + s + 8 * c), a[h][c]);
    }
  }
  if (padded && rest > 0) {
    alignas(16) uint16_t xt[32] = {};
    std::copy(x + full, x + n, xt);
    for (int c = 0; c < 4; ++c) {
      const __m256 xv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(xt + 8 * c)));
      const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * c));
      const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)), lane);
      for (int h = 0; h < m; ++h) {
        a[h][c] = _mm256_fmadd_ps(xv, _mm256_maskload_ps(y[h] + full + 8 * c, keep), a[h][c]);
      }
    }
  }
  for (int h = 0; h < m; ++h) {
    double sum = GgmlHsum(GgmlFoldLanes(a[h]));
    if (!padded) {
      for (int64_t i = full; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(x[i]) * y[h][i]);
    }
    out[h] = static_cast<float>(sum);
  }
}

// The fold of a 32-lane ggml accumulator held as two zmm ([a0 | a1], [a2 | a3]):
// [a0 + a2 | a1 + a3], then its halves added, then GgmlHsum.
TANDEM_AVX512 inline float GgmlFold512(__m512 lo, __m512 hi) {
  const __m512 x = _mm512_add_ps(lo, hi);
  const __m256 f = _mm256_add_ps(_mm512_castps512_ps256(x),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

// GgmlDotsAvx2 with zmm registers, m <= 4: values 32 s .. 32 s + 15 of a step are
// accumulators 0 and 1 side by side, 32 s + 16 .. 32 s + 31 accumulators 2 and 3, every
// lane's chain unchanged; a padded last step masked.
TANDEM_AVX512 void GgmlDotsAvx512(const uint16_t* x, const float* const* y, int m, int64_t n, bool padded,
                                  float* out) {
  const int64_t full = n - n % 32, rest = n - full;
  __m512 lo[4], hi[4];
  for (int h = 0; h < 4; ++h) lo[h] = hi[h] = _mm512_setzero_ps();
  for (int64_t s = 0; s < full; s += 32) {
    const __m512 x0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + s)));
    const __m512 x1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + s + 16)));
    for (int h = 0; h < m; ++h) {
      lo[h] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y[h] + s), lo[h]);
      hi[h] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(y[h] + s + 16), hi[h]);
    }
  }
  if (padded && rest > 0) {
    const __mmask16 m0 = static_cast<__mmask16>(rest >= 16 ? 0xFFFF : (1u << rest) - 1);
    const __mmask16 m1 = static_cast<__mmask16>(rest <= 16 ? 0 : (1u << (rest - 16)) - 1);
    const __m512 x0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m0, x + full));
    const __m512 x1 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m1, x + full + 16));
    for (int h = 0; h < m; ++h) {
      lo[h] = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(m0, y[h] + full), lo[h]);
      hi[h] = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(m1, y[h] + full + 16), hi[h]);
    }
  }
  for (int h = 0; h < m; ++h) {
    double sum = GgmlFold512(lo[h], hi[h]);
    if (!padded) {
      for (int64_t i = full; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(x[i]) * y[h][i]);
    }
    out[h] = static_cast<float>(sum);
  }
}

// TransposeF16Rows for m rows (m % 8 == 0, m <= 64): 8 x 8 blocks of 16-bit values through
// three rounds of unpacks, the blocks of one 8-value column range for all m rows in turn
// (each column gets 2 m contiguous bytes per pass; a column a page apart from the next
// would otherwise evict its line between 16-byte stores); the last hd % 8 values one by one.
TANDEM_AVX2 void TransposeF16RowsAvx2(const uint16_t* const* rows, int64_t m, int hd, uint16_t* vt,
                                      int64_t vt_stride) {
  int d = 0;
  for (; d + 8 <= hd; d += 8) {
    for (int64_t j = 0; j < m; j += 8) {
      __m128i r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + i] + d));
      __m128i a[8], b[8];
      for (int i = 0; i < 4; ++i) {
        a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
      }
      for (int i = 0; i < 2; ++i) {
        b[4 * i + 0] = _mm_unpacklo_epi32(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm_unpackhi_epi32(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm_unpacklo_epi32(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm_unpackhi_epi32(a[4 * i + 1], a[4 * i + 3]);
      }
      uint16_t* out = vt + j;
      for (int i = 0; i < 4; ++i) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (d + 2 * i) * vt_stride), _mm_unpacklo_epi64(b[i], b[4 + i]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (d + 2 * i + 1) * vt_stride),
                         _mm_unpackhi_epi64(b[i], b[4 + i]));
      }
    }
  }
  for (; d < hd; ++d) {
    for (int64_t j = 0; j < m; ++j) vt[d * vt_stride + j] = rows[j][d];
  }
}

const bool kHaveAvx512 = KernelIsaLevel() >= IsaLevel::kAvx512;

// out[h] = GgmlDot(x, y[h]) for h < g at this process's level (see GgmlDotsAvx2), heads
// in groups sharing x's loads; the scalar level spells the order out (GgmlDotF16Scalar).
void GgmlDots(const uint16_t* x, const float* const* y, int g, int64_t n, bool padded, float* out) {
  if (kHaveAvx512) {
    for (int h0 = 0; h0 < g; h0 += 4) GgmlDotsAvx512(x, y + h0, std::min(4, g - h0), n, padded, out + h0);
  } else if (kHaveAvx2) {
    for (int h0 = 0; h0 < g; h0 += 2) GgmlDotsAvx2(x, y + h0, std::min(2, g - h0), n, padded, out + h0);
  } else {
    const int64_t len = padded ? (n + 31) / 32 * 32 : n;  // padded: zero lanes past n
    for (int h = 0; h < g; ++h) {
      const float* yh = y[h];
      out[h] = GgmlDotF16Scalar(len, [&](int64_t i) { return i < n ? Fp16ToFp32(x[i]) : 0.0f; },
                                [&](int64_t i) { return i < n ? yh[i] : 0.0f; });
    }
  }
}

}  // namespace

void DotF16Rows(const float* q, const uint16_t* const* k_rows, int64_t n, int hd, float scale,
                float* scores) {
  DotRows<F16Head>(q, k_rows, n, hd, scale, scores);
}

void WeightedSumF16Rows(const float* p, const uint16_t* const* v_rows, int64_t n, int hd,
                        float* out) {
  WeightedSumRows<F16Head>(p, v_rows, n, hd, out);
}

void DotF16RowsGroup(const float* const* q, int g, const uint16_t* const* k_rows, int64_t n, int hd,
                     float scale, float* const* scores) {
  DotRowsGroup<F16Head>(q, g, k_rows, n, hd, scale, scores);
}

void WeightedSumF16RowsGroup(const float* const* p, int g, const uint16_t* const* v_rows, int64_t n,
                             int hd, float* const* out) {
  WeightedSumRowsGroup<F16Head>(p, g, v_rows, n, hd, out);
}

void DotKvRowsGroup(KvDtype dtype, const float* const* q, int g, const uint8_t* const* k_heads,
                    int64_t n, int hd, float scale, float* const* scores) {
  switch (dtype) {
    case KvDtype::kF16:
      return DotRowsGroup<F16Head>(q, g, k_heads, n, hd, scale, scores);
    case KvDtype::kBf16:
      return DotRowsGroup<Bf16Head>(q, g, k_heads, n, hd, scale, scores);
    case KvDtype::kFp8E4M3:
      return DotRowsGroup<Fp8Head<true>>(q, g, k_heads, n, hd, scale, scores);
    case KvDtype::kFp8E5M2:
      return DotRowsGroup<Fp8Head<false>>(q, g, k_heads, n, hd, scale, scores);
  }
}

void DotF16RowsGgml(const float* const* q, int g, const uint16_t* const* k_rows, int64_t n, int hd,
                    float scale, float* const* scores) {
  float dots[64];
  for (int h0 = 0; h0 < g; h0 += 64) {
    const int m = std::min(64, g - h0);
    for (int64_t j = 0; j < n; ++j) {
      GgmlDots(k_rows[j], q + h0, m, hd, /*padded=*/false, dots);
      for (int h = 0; h < m; ++h) scores[h0 + h][j] = dots[h] * scale;
    }
  }
}

void TransposeF16Rows(const uint16_t* const* rows, int64_t n, int hd, uint16_t* vt, int64_t vt_stride) {
  int64_t j0 = 0;
  if (kHaveAvx2) {
    for (; j0 + 8 <= n; j0 += 32) {
      const int64_t m = std::min<int64_t>(32, (n - j0) / 8 * 8);
      TransposeF16RowsAvx2(rows + j0, m, hd, vt + j0, vt_stride);
      if (m < 32) {
        j0 += m;
        break;
      }
    }
  }
  for (; j0 < n; ++j0) {
    for (int d = 0; d < hd; ++d) vt[d * vt_stride + j0] = rows[j0][d];
  }
}

void WeightedSumF16ColumnsGgml(const float* const* p, int g, const uint16_t* vt, int64_t vt_stride, int64_t n,
                               int hd, float* const* out) {
  float sums[64];
  for (int h0 = 0; h0 < g; h0 += 64) {
    const int m = std::min(64, g - h0);
    for (int d = 0; d < hd; ++d) {
      GgmlDots(vt + d * vt_stride, p + h0, m, n, /*padded=*/true, sums);
      for (int h = 0; h < m; ++h) out[h0 + h][d] = sums[h];
    }
  }
}

void WeightedSumKvRowsGroup(KvDtype dtype, const float* const* p, int g,
                            const uint8_t* const* v_heads, int64_t n, int hd, float* const* out) {
  switch (dtype) {
    case KvDtype::kF16:
      return WeightedSumRowsGroup<F16Head>(p, g, v_heads, n, hd, out);
    case KvDtype::kBf16:
      return WeightedSumRowsGroup<Bf16Head>(p, g, v_heads, n, hd, out);
    case KvDtype::kFp8E4M3:
      return WeightedSumRowsGroup<Fp8Head<true>>(p, g, v_heads, n, hd, out);
    case KvDtype::kFp8E5M2:
      return WeightedSumRowsGroup<Fp8Head<false>>(p, g, v_heads, n, hd, out);
  }
}

}  // namespace tandem
