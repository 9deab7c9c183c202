#include "kernels/quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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
template <int NT>
__attribute__((target("avx2,fma,f16c"))) void DotQ4_KAvx2N(const void* w_row, const void* const* a_rows,
                                                         int64_t n_blocks, float* out) {
  const BlockQ4_K* w = static_cast<const BlockQ4_K*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  float mins[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    mins[t] = 0;
  }
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) ScaleMinK4(j, w[i].scales, &sc[j], &m[j]);
    __m256i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * c));
      lo[c] = _mm256_and_si256(packed, low_mask);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
    }
    const float wd = HalfToFloat(w[i].d), wdmin = HalfToFloat(w[i].dmin);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      int32_t summ = 0;
      for (int j = 0; j < 8; ++j) summ += m[j] * (at.bsums[2 * j] + at.bsums[2 * j + 1]);
      __m256i sumi = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 64 * c));
        const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 64 * c + 32));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], a_lo), _mm256_set1_epi16(sc[2 * c]));
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], a_hi), _mm256_set1_epi16(sc[2 * c + 1]));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
      }
      const float d = at.d * wd;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[t]);
      mins[t] += at.d * wdmin * static_cast<float>(summ);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HorizontalSum(acc[t]) - mins[t];
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
    const float wd = HalfToFloat(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      int32_t offset = 0;  // sum(scale[s] * bsums[s]): the -32 of every value, / 32
      for (int s = 0; s < 16; ++s) offset += w[i].scales[s] * at.bsums[s];
      __m256i sumi = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qs + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], av), scales[k]));
      }
      sumi = _mm256_sub_epi32(sumi, _mm256_setr_epi32(32 * offset, 0, 0, 0, 0, 0, 0, 0));
      const float d = at.d * wd;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HorizontalSum(acc[t]);
}

float DotQ4_KAvx2(const void* w_row, const void* a_row, int64_t n_blocks) {
  float out;
  DotQ4_KAvx2N<1>(w_row, &a_row, n_blocks, &out);
  return out;
}

float DotQ6_KAvx2(const void* w_row, const void* a_row, int64_t n_blocks) {
  float out;
  DotQ6_KAvx2N<1>(w_row, &a_row, n_blocks, &out);
  return out;
}

const bool kUseAvx2 = GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;

}  // namespace

bool HasInt8Unpack(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ5_0 || type == TensorType::kQ4_0;
}

void UnpackRowToInt8(TensorType type, const void* w_row, int64_t cols, int8_t* q, float* d) {
  const int64_t n = cols / 32;
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case TensorType::kQ8_0: {
        const BlockQ8_0& b = static_cast<const BlockQ8_0*>(w_row)[i];
        std::memcpy(q + 32 * i, b.qs, 32);
        d[i] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ5_0: {
        const BlockQ5_0& b = static_cast<const BlockQ5_0*>(w_row)[i];
        UnpackQ5_0(b, q + 32 * i);
        d[i] = Fp16ToFp32(b.d);
        break;
      }
      case TensorType::kQ4_0: {
        const BlockQ4_0& b = static_cast<const BlockQ4_0*>(w_row)[i];
        UnpackQ4_0(b, q + 32 * i);
        d[i] = Fp16ToFp32(b.d);
        break;
      }
      default: TANDEM_CHECK(false) << "no int8 unpack for type " << static_cast<int>(type);
    }
  }
}

namespace {

void DotInt8Tile4x2Scalar(const int8_t* const w_q[4], const float* const w_d[4], const int8_t* a0_q,
                          const float* a0_d, const int8_t* a1_q, const float* a1_d, int64_t n_blocks,
                          float out[4][2]) {
  for (int r = 0; r < 4; ++r) {
    float s0 = 0, s1 = 0;
    for (int64_t b = 0; b < n_blocks; ++b) {
      int32_t i0 = 0, i1 = 0;
      for (int j = 0; j < 32; ++j) {
        i0 += w_q[r][32 * b + j] * a0_q[32 * b + j];
        i1 += w_q[r][32 * b + j] * a1_q[32 * b + j];
      }
      s0 += w_d[r][b] * a0_d[b] * static_cast<float>(i0);
      s1 += w_d[r][b] * a1_d[b] * static_cast<float>(i1);
    }
    out[r][0] = s0;
    out[r][1] = s1;
  }
}

__attribute__((target("avx2,fma"))) void DotInt8Tile4x2Avx2(const int8_t* const w_q[4], const float* const w_d[4],
                                                          const int8_t* a0_q, const float* a0_d,
                                                          const int8_t* a1_q, const float* a1_d,
                                                          int64_t n_blocks, float out[4][2]) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0_q + 32 * b));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1_q + 32 * b));
    for (int r = 0; r < 4; ++r) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_q[r] + 32 * b));
      const __m256i abs_w = _mm256_sign_epi8(w, w);
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a0, w)), ones);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a1, w)), ones);
      acc[r][0] = _mm256_fmadd_ps(_mm256_set1_ps(w_d[r][b] * a0_d[b]), _mm256_cvtepi32_ps(p0), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(_mm256_set1_ps(w_d[r][b] * a1_d[b]), _mm256_cvtepi32_ps(p1), acc[r][1]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    out[r][0] = HorizontalSum(acc[r][0]);
    out[r][1] = HorizontalSum(acc[r][1]);
  }
}

}  // namespace

void DotInt8Tile4x2(const int8_t* const w_q[4], const float* const w_d[4], const int8_t* a0_q, const float* a0_d,
                    const int8_t* a1_q, const float* a1_d, int64_t n_blocks, float out[4][2]) {
  if (GetCpuFeatures().avx2 && GetCpuFeatures().fma) {
    DotInt8Tile4x2Avx2(w_q, w_d, a0_q, a0_d, a1_q, a1_d, n_blocks, out);
  } else {
    DotInt8Tile4x2Scalar(w_q, w_d, a0_q, a0_d, a1_q, a1_d, n_blocks, out);
  }
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
    default: return VecDotQ8Reference(type, w, a, cols);
  }
}

bool HasMultiTokenDot(TensorType type) {
  return kUseAvx2 && (type == TensorType::kQ4_K || type == TensorType::kQ6_K);
}

void VecDotQ8x4(TensorType type, const void* w_row, const void* const a_rows[4], int64_t cols, float out[4]) {
  if (type == TensorType::kQ4_K) return DotQ4_KAvx2N<4>(w_row, a_rows, cols / 256, out);
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
    for (int j = 0; j < 256; ++j) {
      const int v = static_cast<int>(std::nearbyint(iscale * x[j]));  // half to even, as ggml
      y.qs[j] = static_cast<int8_t>(std::min(127, v));
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y.qs[j * 16 + i];
      y.bsums[j] = static_cast<int16_t>(sum);
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
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int j = 0; j < 32; ++j) out[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
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
