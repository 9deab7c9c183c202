// ExpNonPositive's constants and its 8-wide AVX2 form, shared by the kernels that take
// exponentials of many non-positive values (sampling weights, the attention softmax).
// Internal to src/kernels: ExpNonPositive (sampling_ops.h) is the scalar twin, with the
// same operations in the same order, so both give the same bits.
#pragma once

#include <immintrin.h>

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

}  // namespace tandem::exp_internal
