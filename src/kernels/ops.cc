#include "kernels/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/exp_internal.h"
#include "kernels/half.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

float DotScalar(const float* a, const float* b, int64_t n) {
  // Four partial sums, as the vector path has, so both round similarly.
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += a[i + k] * b[i + k];
  float sum = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  __m128 lo = _mm256_castps256_ps128(acc), hi = _mm256_extractf128_ps(acc, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// ggml_vec_dot_f32 (AVX2): see DotF32Ggml.
__attribute__((target("avx2,fma"))) float DotGgmlAvx2(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t np = n & ~int64_t{31};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), acc[j]);
    }
  }
  acc[0] = _mm256_add_ps(acc[0], acc[2]);
  acc[1] = _mm256_add_ps(acc[1], acc[3]);
  acc[0] = _mm256_add_ps(acc[0], acc[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  __m128 sum = _mm_hadd_ps(t1, t1);
  // The remainder multiplied and added apart (intrinsics: the compiler may not fuse them).
  for (int64_t i = np; i < n; ++i) sum = _mm_add_ss(sum, _mm_mul_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i])));
  return _mm_cvtss_f32(sum);
}

// ggml's hsum_float_8 (and tinyBLAS's hsum): (hi + lo), then (0+2) + (1+3).
__attribute__((target("avx2"))) inline float HsumGgml(__m256 v) {
  __m128 g = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  g = _mm_add_ps(g, _mm_movehl_ps(g, g));
  g = _mm_add_ss(g, _mm_movehdup_ps(g));
  return _mm_cvtss_f32(g);
}

// ggml_vec_dot_bf16 (AVX2): see DotBf16Ggml. ggml writes a multiply and an add, which its
// C++ build contracts into one fused multiply-add (compared with llama.cpp's tensors).
__attribute__((target("avx2,fma"))) float DotBf16GgmlAvx2(const float* a, const float* b, int64_t n) {
  __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      c[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), c[j]);
    }
  }
  double sum = HsumGgml(_mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3])));
  for (; i < n; ++i) {
    const float p = a[i] * b[i];
    sum += p;
  }
  return static_cast<float>(sum);
}

// tinyBLAS<8, __m256> (AVX2): see DotF32Sgemm. Precondition: n % 8 == 0.
__attribute__((target("avx2,fma"))) float DotSgemmAvx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return HsumGgml(acc);
}

float DotSgemmScalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  for (int64_t i = 0; i < n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  const float h[4] = {acc[4] + acc[0], acc[5] + acc[1], acc[6] + acc[2], acc[7] + acc[3]};
  return (h[0] + h[2]) + (h[1] + h[3]);
}

// The same order without intrinsics (std::fma for the fused multiply-adds).
float DotGgmlScalar(const float* a, const float* b, int64_t n) {
  float acc[4][8] = {};
  const int64_t np = n & ~int64_t{31};
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) acc[j][l] = std::fma(a[i + 8 * j + l], b[i + 8 * j + l], acc[j][l]);
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  const float t0[4] = {v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]};
  float sum = (t0[0] + t0[1]) + (t0[2] + t0[3]);
  for (int64_t i = np; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

__attribute__((target("avx2,fma"))) void AxpyAvx2(float a, const float* x, float* y, int64_t n) {
  __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

__attribute__((target("avx2,fma,f16c"))) float DotF16Avx2(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))),
                           _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + 8))),
                           _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8))), acc1);
  }
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += Fp16ToFp32(a[i]) * Fp16ToFp32(b[i]);
  return sum;
}

__attribute__((target("avx2,fma,f16c"))) void AxpyF16Avx2(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * Fp16ToFp32(x[i]);
}

const bool kHaveAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;
const bool kHaveF16c = kHaveAvx2;  // the avx2 level includes F16C

}  // namespace

float DotF32(const float* a, const float* b, int64_t n) {
  return kHaveAvx2 ? DotAvx2(a, b, n) : DotScalar(a, b, n);
}

float DotF32Ggml(const float* a, const float* b, int64_t n) {
  return kHaveAvx2 ? DotGgmlAvx2(a, b, n) : DotGgmlScalar(a, b, n);
}

float DotBf16Ggml(const float* a, const float* b, int64_t n) {
  if (kHaveAvx2) return DotBf16GgmlAvx2(a, b, n);
  float c[4][8] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) c[j][l] = std::fma(a[i + 8 * j + l], b[i + 8 * j + l], c[j][l]);
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
  const float h[4] = {v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]};
  double sum = (h[0] + h[2]) + (h[1] + h[3]);
  for (; i < n; ++i) {
    const float p = a[i] * b[i];
    sum += p;
  }
  return static_cast<float>(sum);
}

float DotF32Sgemm(const float* a, const float* b, int64_t n) {
  if (n % 8 != 0) return DotF32Ggml(a, b, n);
  return kHaveAvx2 ? DotSgemmAvx2(a, b, n) : DotSgemmScalar(a, b, n);
}

void IndexerScoresF16(const float* q, const float* w, int n_heads, const uint16_t* const* k_rows, int64_t n,
                      int hd, float* scores) {
  thread_local std::vector<float> k;
  k.resize(static_cast<size_t>(hd));
  for (int64_t j = 0; j < n; ++j) {
    Fp16ToFp32Row(k_rows[j], k.data(), hd);
    float score = 0.0f;
    for (int h = 0; h < n_heads; ++h) {
      const float qk = DotF32Ggml(q + static_cast<int64_t>(h) * hd, k.data(), hd);
      const float relu = qk > 0.0f ? qk : 0.0f;
      const float term = relu * w[h];  // rounded before the add (no FMA), as ggml's build does
      score += term;
    }
    scores[j] = score;
  }
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  if (kHaveAvx2) return AxpyAvx2(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float DotF16(const uint16_t* a, const uint16_t* b, int64_t n) {
  if (kHaveF16c) return DotF16Avx2(a, b, n);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += Fp16ToFp32(a[i]) * Fp16ToFp32(b[i]);
  return sum;
}

void AxpyF16(float a, const uint16_t* x, float* y, int64_t n) {
  if (kHaveF16c) return AxpyF16Avx2(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * Fp16ToFp32(x[i]);
}

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;  // double: GGML accumulates the square sum in ggml_float (double)
  // Each square rounded to float first, as ggml's (ggml_float)(x * x).
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void LayerNorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  double sum = 0;  // ggml_vec_sum_f32: double, then rounded to float
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum) / static_cast<float>(n);
  // ggml_vec_cvar_f32 (AVX2 build): each 8 values' squares summed in float as its
  // horizontal adds pair them ((0+4)+(2+6)) + ((1+5)+(3+7)), those sums in double.
  double var = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float d[8];
    for (int l = 0; l < 8; ++l) {
      y[i + l] = x[i + l] - mean;
      d[l] = y[i + l] * y[i + l];
    }
    const float h[4] = {d[4] + d[0], d[5] + d[1], d[6] + d[2], d[7] + d[3]};
    var += static_cast<double>((h[0] + h[2]) + (h[1] + h[3]));
  }
  for (; i < n; ++i) {
    y[i] = x[i] - mean;
    var += static_cast<double>(y[i] * y[i]);
  }
  const float variance = static_cast<float>(var / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int64_t j = 0; j < n; ++j) {
    y[j] *= scale;
    if (w) y[j] *= w[j];
    if (b) y[j] += b[j];
  }
}

void RopeAngles(int rot_dims, int64_t position, float freq_base, float freq_scale, float* cos_out,
                float* sin_out) {
  const int half = rot_dims / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  float theta = static_cast<float>(position) * freq_scale;
  for (int i = 0; i < half; ++i) {
    cos_out[i] = std::cos(theta);
    sin_out[i] = std::sin(theta);
    theta *= theta_scale;
  }
}

void RopeAnglesFactors(int rot_dims, int64_t position, float freq_base, float freq_scale,
                       const float* factors, float* cos_out, float* sin_out) {
  const int half = rot_dims / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  float theta_extrap = static_cast<float>(position);
  for (int i = 0; i < half; ++i) {
    const float theta = freq_scale * (theta_extrap / factors[i]);
    cos_out[i] = std::cos(theta);
    sin_out[i] = std::sin(theta);
    theta_extrap *= theta_scale;
  }
}

void RopeAnglesYarn(int rot_dims, int64_t position, float freq_base, float freq_scale,
                    float ext_factor, float attn_factor, float corr_low, float corr_high,
                    float* cos_out, float* sin_out) {
  const int half = rot_dims / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  float mscale = attn_factor;
  if (ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  float theta_extrap = static_cast<float>(position);
  for (int i = 0; i < half; ++i) {
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
      // ggml's rope_yarn_ramp(low, high, i0) with i0 = 2i, (i0 / 2) in integers.
      const float y = (static_cast<float>(i) - corr_low) / std::max(0.001f, corr_high - corr_low);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
      theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    }
    cos_out[i] = std::cos(theta) * mscale;
    sin_out[i] = std::sin(theta) * mscale;
    theta_extrap *= theta_scale;
  }
}

void RopeApply(float* head, int rot_dims, const float* cos, const float* sin, bool neox) {
  const int half = rot_dims / 2;
  for (int i = 0; i < half; ++i) {
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * cos[i] - x1 * sin[i];
    head[b] = x0 * sin[i] + x1 * cos[i];
  }
}

void Rope(float* head, int head_dim, int rot_dims, int64_t position, float freq_base,
          float freq_scale, bool neox) {
  thread_local std::vector<float> angles;
  angles.resize(static_cast<size_t>(rot_dims));
  RopeAngles(rot_dims, position, freq_base, freq_scale, angles.data(),
             angles.data() + rot_dims / 2);
  RopeApply(head, rot_dims, angles.data(), angles.data() + rot_dims / 2, neox);
  (void)head_dim;
}

void SoftmaxLibm(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

namespace {

// (e0+e4 + e2+e6) + (e1+e5 + e3+e7): the order of SoftmaxAvx2's reduction of 8 lanes.
inline float Sum8(const float* e) {
  return ((e[0] + e[4]) + (e[2] + e[6])) + ((e[1] + e[5]) + (e[3] + e[7]));
}

__attribute__((target("avx2,fma"))) void SoftmaxAvx2(float* x, int64_t n, float max, double* sum,
                                                     int64_t* done) {
  const __m256 m = _mm256_set1_ps(max);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = exp_internal::GgmlExpf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, v);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    *sum += _mm_cvtss_f32(s);
  }
  *done = i;
}

__attribute__((target("avx2,fma"))) float MaxAvx2(const float* x, int64_t n, int64_t* done) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float lanes[8];
  _mm256_storeu_ps(lanes, vmax);
  float max = -INFINITY;
  for (float v : lanes) max = std::max(max, v);
  *done = i;
  return max;
}

}  // namespace

void Softmax(float* x, int64_t n) {
  int64_t i = 0;
  float max = kHaveAvx2 ? MaxAvx2(x, n, &i) : -INFINITY;
  for (; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  i = 0;
  if (kHaveAvx2) {
    SoftmaxAvx2(x, n, max, &sum, &i);
  } else {
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; ++l) x[i + l] = exp_internal::GgmlExpf(x[i + l] - max);
      sum += Sum8(x + i);
    }
  }
  if (i < n) {  // the last n % 8 values: a group padded with masked (zero) lanes
    float tail[8] = {};
    for (int64_t l = 0; i + l < n; ++l) tail[l] = x[i + l] = exp_internal::GgmlExpf(x[i + l] - max);
    sum += Sum8(tail);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (i = 0; i < n; ++i) x[i] *= inv;
}

namespace {

// GELU of every fp16 value, rounded to fp16 and widened back: GGML's table, computed
// with its formula (0.5 h (1 + tanh(sqrt(2/pi) h (1 + 0.044715 h^2))) in float).
const float* GeluTable() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(0x10000);
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float h = Fp16ToFp32(static_cast<Fp16Bits>(bits));
      const float g = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h)));
      t[bits] = Fp16ToFp32(Fp32ToFp16(g));
    }
    return t;
  }();
  return table.data();
}

float GeluOne(float v, const float* table) {
  if (v <= -10.0f) return 0.0f;
  if (v >= 10.0f) return v;
  return table[Fp32ToFp16(v)];
}

__attribute__((target("avx2,fma,f16c"))) void GeluMulAvx2(float* x, const float* y, int64_t n,
                                                          const float* table) {
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    __m256 g = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
    g = _mm256_blendv_ps(g, v, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
    g = _mm256_andnot_ps(_mm256_cmp_ps(v, lo, _CMP_LE_OQ), g);
    _mm256_storeu_ps(x + i, _mm256_mul_ps(g, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) x[i] = GeluOne(x[i], table) * y[i];
}

}  // namespace

void GeluMul(float* x, const float* y, int64_t n) {
  const float* table = GeluTable();
  if (kHaveF16c) return GeluMulAvx2(x, y, n, table);
  for (int64_t i = 0; i < n; ++i) x[i] = GeluOne(x[i], table) * y[i];
}

void SiluMul(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = v / (1.0f + std::exp(-v)) * y[i];
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tandem
