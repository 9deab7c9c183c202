// ExpNonPositive's constants and its 8-wide AVX2 form, shared by the kernels that take
// exponentials of many non-positive values (sampling weights, the attention softmax).
// Internal to src/kernels: ExpNonPositive (sampling_ops.h) is the scalar twin, with the
// same operations in the same order, so both give the same bits.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tandem::exp_internal {

// ExpNonPositive's constants.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;  // 11 bits of ln 2: n * kLn2Hi is exact
constexpr float kLn2Lo = 1.42860682030941723212e-6f;
constexpr float kMinArg = -87.0f;
constexpr float kTaylor[8] = {1.0f,      1.0f,       1.0f / 2,   1.0f / 6,
                              1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};

__attribute__((target("avx2,fma"))) inline __m256 ExpNonPositive8(__m256 x) {
  // x >= kMinArg (false for NaN) keeps a lane; the others end up 0.
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kMinArg), _CMP_GE_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(kMinArg));  // NaN -> kMinArg (masked below)
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kTaylor[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kTaylor[k]));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), keep);
}

// e^x as ggml_v_expf computes it on AVX2 (llama.cpp's softmax, so the attention's
// probabilities take its bits): n = round(x * log2(e)) through the 1.5 * 2^23 shift,
// b = x - n * ln2 in two parts, a degree-5 polynomial j, result k + k * j with k = 2^n;
// |n| > 126 scales by two factors (so 2^n may leave float's exponent range), |n| > 192
// saturates (0 for x -> -inf, inf for large x). Each lane independent.
constexpr float kGgmlShift = 0x1.8p23f;
constexpr float kGgmlLog2e = 0x1.715476p+0f;
constexpr float kGgmlLn2Hi = 0x1.62e4p-1f;
constexpr float kGgmlLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kGgmlP5 = 0x1.0e4020p-7f, kGgmlP4 = 0x1.573e2ep-5f, kGgmlP3 = 0x1.555e66p-3f, kGgmlP2 = 0x1.fffdb6p-2f,
                kGgmlP1 = 0x1.ffffecp-1f;

__attribute__((target("avx2,fma"))) inline __m256 GgmlExpf8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(kGgmlShift);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(kGgmlLog2e), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(kGgmlLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kGgmlLn2Hi), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 wide = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(kGgmlP5), b, _mm256_set1_ps(kGgmlP4)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(kGgmlP3), b, _mm256_set1_ps(kGgmlP2))),
      u, _mm256_mul_ps(_mm256_set1_ps(kGgmlP1), b));
  const __m256 plain = _mm256_fmadd_ps(k, j, k);
  if (_mm256_movemask_ps(wide) == 0) return plain;
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 huge = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  return _mm256_or_ps(_mm256_and_ps(huge, _mm256_mul_ps(s1, s1)),
                      _mm256_andnot_ps(huge, _mm256_or_ps(_mm256_and_ps(wide, scaled), _mm256_andnot_ps(wide, plain))));
}

// GgmlExpf8's lane, one value (the same operations, so the same bits).
inline float GgmlExpf(float x) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  auto value = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  const float z = std::fma(x, kGgmlLog2e, kGgmlShift);
  const float n = z - kGgmlShift;
  const float b = std::fma(-n, kGgmlLn2Lo, std::fma(-n, kGgmlLn2Hi, x));
  const uint32_t e = bits(z) << 23;
  const float k = value(e + bits(1.0f));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kGgmlP5, b, kGgmlP4), u, std::fma(kGgmlP3, b, kGgmlP2)), u, kGgmlP1 * b);
  const float abs_n = std::fabs(n);
  if (!(abs_n > 126.0f)) return std::fma(k, j, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = value(g + 0x7f000000u);
  const float s2 = value(e - g);
  if (abs_n > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

}  // namespace tandem::exp_internal
