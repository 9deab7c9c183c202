#include "kernels/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu_features.h"
#include "kernels/half.h"

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

const bool kHaveAvx2 = GetCpuFeatures().avx2 && GetCpuFeatures().fma;
const bool kHaveF16c = kHaveAvx2 && GetCpuFeatures().f16c;

}  // namespace

float DotF32(const float* a, const float* b, int64_t n) {
  return kHaveAvx2 ? DotAvx2(a, b, n) : DotScalar(a, b, n);
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
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void Rope(float* head, int head_dim, int rot_dims, int64_t position, float freq_base,
          float freq_scale, bool neox) {
  const int half = rot_dims / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  float theta = static_cast<float>(position) * freq_scale;
  for (int i = 0; i < half; ++i) {
    const float c = std::cos(theta), s = std::sin(theta);
    int a = neox ? i : 2 * i;
    int b = neox ? i + half : 2 * i + 1;
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
    theta *= theta_scale;
  }
  (void)head_dim;
}

void Softmax(float* x, int64_t n) {
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

void GeluMul(float* x, const float* y, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v <= -10.0f) {
      x[i] = 0.0f;
    } else if (v >= 10.0f) {
      x[i] = v * y[i];
    } else {
      const float h = Fp16ToFp32(Fp32ToFp16(v));
      const float g = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h)));
      x[i] = Fp16ToFp32(Fp32ToFp16(g)) * y[i];
    }
  }
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
