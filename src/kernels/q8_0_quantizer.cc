#include "kernels/q8_0_quantizer.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/isa.h"

namespace tandem {

namespace {

// QuantizeActivationsQ8_0's arithmetic, 32 values at a time: amax, id = 127 / amax,
// q = round-half-even(x * id) (cvtps_epi32 under the default rounding mode).
__attribute__((target("avx2,fma,f16c"))) float QuantizeBlockQ8_0Avx2(const float* x, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    m = _mm256_max_ps(m, _mm256_and_ps(v[k], abs_mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  // packs work per 128-bit lane; the permute puts the 8 dwords back in order.
  const __m256i w01 = _mm256_packs_epi32(i[0], i[1]), w23 = _mm256_packs_epi32(i[2], i[3]);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return amax;
}

float QuantizeBlockQ8_0Scalar(const float* x, int8_t* q) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  return amax;
}

const bool kUseAvx2Quantize = KernelIsaLevel() >= IsaLevel::kAvx2;

}  // namespace

float QuantizeBlockQ8_0(const float* x, int8_t* q) {
  return kUseAvx2Quantize ? QuantizeBlockQ8_0Avx2(x, q) : QuantizeBlockQ8_0Scalar(x, q);
}

}  // namespace tandem
