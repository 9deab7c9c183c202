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
#include "kernels/q8_0_quantizer.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

template <typename Block, typename Unpack>
float DotScalar(const void* w_row, const void* a_row, int64_t n_blocks, Unpack unpack) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
  // The AVX2 paths' (and llama.cpp's) float steps lane by lane: 8 lanes of 4 products
  // per block, acc_j = fma(d_w * d_x, lane_j, acc_j), then HorizontalSum's order; so
  // every ISA level gives the same bits.
  float acc[8] = {};
  int8_t q[32];
  for (int64_t i = 0; i < n_blocks; ++i) {
    unpack(w[i], q);
    const float d = Fp16ToFp32(w[i].d) * Fp16ToFp32(a[i].d);
    for (int j = 0; j < 8; ++j) {
      int32_t lane = 0;
      for (int k = 4 * j; k < 4 * j + 4; ++k) lane += q[k] * a[i].qs[k];
      acc[j] = std::fma(d, static_cast<float>(lane), acc[j]);
    }
  }
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = acc[j] + acc[j + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
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

// In llama.cpp's order for Q4_K on x86 (its AVX2 build repacks every Q4_K matrix whose
// row count is a multiple of 8 into q4_K_8x8 and runs ggml_gemv_q4_K_8x8_q8_K: MUL_MAT_ID
// (the experts) for every token, MUL_MAT for decode and its token-by-token path): per
// super-block the exact integer sums isum = sum_j scale_j * dot_j and imin = sum_j min_j *
// bsum_j, acc = fma(float(isum), d_w * d_x, acc), acc_min = fma(float(imin), dmin_w * d_x,
// acc_min), and acc - acc_min at the end. Every Q4_K path here gives these bits.
float DotQ4_KReference(const void* w_row, const void* a_row, int64_t n_blocks) {
  const BlockQ4_K* w = static_cast<const BlockQ4_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float acc = 0, acc_min = 0;
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
    acc = std::fma(static_cast<float>(sumi), Fp16ToFp32(w[i].d) * a[i].d, acc);
    acc_min = std::fma(static_cast<float>(summ), Fp16ToFp32(w[i].dmin) * a[i].d, acc_min);
  }
  return acc - acc_min;
}

// Q5_K in ggml_vec_dot_q5_K_q8_K's AVX2 order (llama.cpp does not repack Q5_K on x86):
// per super-block the 8 int32 lanes of the scaled products (lane l: bytes 4l..4l+3 of each
// 32-value vector, as `vpmaddubsw` + `vpmaddwd` leave them), acc[l] = fma(d_x * d_w,
// float(lane), acc[l]); the mins apart: summs += (-d_x * dmin_w) * float(sum_j min_j *
// bsum_j), multiply and add rounded apart; hsum(acc) + summs at the end (hsum: ggml's
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))).
float DotQ5_KReference(const void* w_row, const void* a_row, int64_t n_blocks) {
  const BlockQ5_K* w = static_cast<const BlockQ5_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float acc[8] = {};
  float summs = 0;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = a[i].d * Fp16ToFp32(w[i].d);
    const float dmin = -a[i].d * Fp16ToFp32(w[i].dmin);
    int32_t imin = 0;
    int32_t lanes[8] = {};
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, w[i].scales, &sc, &m);
      imin += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
      for (int l = 0; l < 32; ++l) {
        const uint8_t packed = w[i].qs[32 * (j / 2) + l];
        const int q = ((j % 2 == 0 ? packed & 0xF : packed >> 4)) | (((w[i].qh[l] >> j) & 1) << 4);
        lanes[l / 4] += sc * q * a[i].qs[32 * j + l];
      }
    }
    summs += dmin * static_cast<float>(imin);  // rounded apart (this file: -ffp-contract=off)
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
  }
  return (((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))) + summs;
}

// Q6_K in ggml_vec_dot_q6_K_q8_K's AVX2 order (DotQ6_KAvx2N's lanes): per super-block 8
// int32 lanes, lane l taking values 32 k + 4 l .. 32 k + 4 l + 3 of every 32-value group
// k (each times its 16-value scale) and -32 * (bsums[2l] * scale[2l] + bsums[2l + 1] *
// scale[2l + 1]) for the values' -32; acc[l] = fma(d_x * d_w, float(lane), acc[l]); ggml's
// 8-lane sum at the end.
float DotQ6_KReference(const void* w_row, const void* a_row, int64_t n_blocks) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float acc[8] = {};
  uint8_t q[256];
  for (int64_t i = 0; i < n_blocks; ++i) {
    UnpackQ6_K(w[i], q);
    int32_t lanes[8];
    for (int l = 0; l < 8; ++l) {
      lanes[l] = -32 * (a[i].bsums[2 * l] * w[i].scales[2 * l] + a[i].bsums[2 * l + 1] * w[i].scales[2 * l + 1]);
    }
    for (int k = 0; k < 8; ++k) {
      for (int b = 0; b < 32; ++b) {
        const int idx = 32 * k + b;
        lanes[b / 4] += w[i].scales[idx / 16] * q[idx] * a[i].qs[idx];
      }
    }
    const float d = a[i].d * Fp16ToFp32(w[i].d);
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// The K-quant dots for NT activation rows at once: each weight super-block is
// unpacked once and used for every row. Integer sums are exact and the float steps per
// row are the same as for NT = 1, so a row's result does not depend on NT (batching
// never changes outputs).
// Q4_K and Q5_K share the layout of scales, mins and low nibbles; Q5_K adds a fifth
// bit per value from qh (bit s of qh[l] for value l of sub-block s).
// Q4_K in llama.cpp's repack order (DotQ4_KReference), Q5_K in ggml's vec_dot order
// (DotQ5_KReference). Sub-block pair c is outermost, so only its values and scales and the
// tokens' sums stay live (16 ymm registers hold no whole unpacked super-block), and with
// an even NT two Q4_K tokens share one fold (Q4_KLlamaStep2, the same lanes' operations).
template <int NT, typename Block>
__attribute__((target("avx2,fma,f16c"))) void DotQ45_KAvx2N(const void* w_row, const void* const* a_rows,
                                                            int64_t n_blocks, float* out) {
  static_assert(NT == 1 || NT % 2 == 0);
  constexpr bool kLlamaOrder = std::is_same_v<Block, BlockQ4_K>;
  constexpr int kFolds = NT == 1 ? 1 : NT / 2;
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = static_cast<const BlockQ8_K*>(a_rows[t]);
  __m256 acc[NT];
  __m128 acc_llama[kFolds];  // [acc, acc_min] of tokens 2p and 2p + 1 (of the token if NT = 1)
  float summs[NT] = {};
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int p = 0; p < kFolds; ++p) acc_llama[p] = _mm_setzero_ps();
  for (int64_t i = 0; i < n_blocks; ++i) {
    if constexpr (NT == 1) {
      // Decode reads each weight once: fetch ~1.5 KB ahead (the next row's start at a row's
      // end, which is the row this thread dots next).
      const char* ahead = reinterpret_cast<const char*>(w + i) + 1536;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
    }
    const __m128i scales_mins = UnpackScalesMinsK4(w[i].scales);
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scales_mins, scales_mins));
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      __m256i lo, hi, sc_lo, sc_hi;
      UnpackQ45_KPairAvx2(w[i], scales16, c, &lo, &hi, &sc_lo, &sc_hi);
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t][i].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(
            _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))), sc_lo);
        const __m256i p_hi = _mm256_madd_epi16(
            _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32))), sc_hi);
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
        // Keeps the sums a running total in registers: without it GCC reassociates the
        // adds into a tree whose products it spills to the stack.
        asm("" : "+x"(sumi[t]));
      }
    }
    const float wd = HalfToFloat(w[i].d), wdmin = HalfToFloat(w[i].dmin);
    __m256i summ[NT];
    for (int t = 0; t < NT; ++t) {
      summ[t] = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][i].bsums)), mins16);
    }
    if constexpr (kLlamaOrder && NT == 1) {
      acc_llama[0] = Q4_KLlamaStep(sumi[0], summ[0], Q4_KLlamaScale(_mm_setr_ps(wd, wdmin, wd, wdmin), a[0][i].d),
                                   acc_llama[0]);
    } else if constexpr (kLlamaOrder) {
      const __m128 w_scales = _mm_setr_ps(wd, wdmin, wd, wdmin);
      for (int t = 0; t < NT; t += 2) {
        acc_llama[t / 2] = Q4_KLlamaStep2(sumi[t], summ[t], sumi[t + 1], summ[t + 1], w_scales, a[t][i].d,
                                          a[t + 1][i].d, acc_llama[t / 2]);
      }
    } else {
      for (int t = 0; t < NT; ++t) {
        const float dx = a[t][i].d;
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * wd), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        summs[t] += (-dx * wdmin) * static_cast<float>(SumLanes(summ[t]));
      }
    }
  }
  if constexpr (kLlamaOrder && NT == 1) {
    out[0] = Q4_KLlamaResult(acc_llama[0]);
  } else if constexpr (kLlamaOrder) {
    for (int t = 0; t < NT; t += 2) Q4_KLlamaResult2(acc_llama[t / 2], &out[t]);
  } else {
    for (int t = 0; t < NT; ++t) out[t] = HorizontalSum(acc[t]) + summs[t];
  }
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
    const float wd = HalfToFloat(w[i].d);
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    __m256i sumi_t[NT];
    for (int t = 0; t < NT; ++t) {
      // sum(scale[s] * bsums[s]) * 32: the -32 offset of every value, spread over lanes.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][i].bsums));
      sumi_t[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5));
    }
    // Half h outermost (as in DotQ45_KAvx2N: only its values, scales and the tokens' sums
    // stay live); the same integers per lane.
    for (int h = 0; h < 2; ++h) {
      __m256i v[4];
      UnpackQ6_KHalfAvx2(w[i], h, v);
      for (int k = 0; k < 4; ++k) {
        const __m256i scale = Q6_KScalePair(scales16, 4 * h + k);
        for (int t = 0; t < NT; ++t) {
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][i].qs + 128 * h + 32 * k));
          sumi_t[t] = _mm256_add_epi32(sumi_t[t], _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], av), scale));
          asm("" : "+x"(sumi_t[t]));  // a running total in registers (as in DotQ45_KAvx2N)
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& at = a[t][i];
      const __m256i sumi = sumi_t[t];
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
    case TensorType::kQ5_K: return DotQ5_KReference(w, a, cols / 256);
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K: return VecDotGeneric(type, w, a, cols);
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
      return kUseAvx512 ? KQuantDotAvx512One(type, w, a, cols / 256) : DotQ4_KAvx2(w, a, cols / 256);
    case TensorType::kQ6_K:
      return kUseAvx512 ? KQuantDotAvx512One(type, w, a, cols / 256) : DotQ6_KAvx2(w, a, cols / 256);
    case TensorType::kQ5_K:
      return kUseAvx512 ? KQuantDotAvx512One(type, w, a, cols / 256) : DotQ5_KAvx2(w, a, cols / 256);
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
  if (kUseAvx512) return KQuantDotAvx512(2, type, w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ4_K) return DotQ45_KAvx2N<4, BlockQ4_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ5_K) return DotQ45_KAvx2N<4, BlockQ5_K>(w_row, a_rows, cols / 256, out);
  if (type == TensorType::kQ6_K) return DotQ6_KAvx2N<4>(w_row, a_rows, cols / 256, out);
  for (int t = 0; t < 4; ++t) out[t] = VecDotQ8(type, w_row, a_rows[t], cols);
}

void VecDotQ8x8(TensorType type, const void* w_row, const void* const a_rows[8], int64_t cols, float out[8]) {
  if (kUseAvx512 && HasMultiTokenDot(type)) return KQuantDotAvx512(4, type, w_row, a_rows, cols / 256, out);
  VecDotQ8x4(type, w_row, a_rows, cols, out);
  VecDotQ8x4(type, w_row, a_rows + 4, cols, out + 4);
}

bool HasPairedQ8KDot(TensorType type) { return kUseAvx512 && HasMultiTokenDot(type); }

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
