#include "kernels/sampling_ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/exp_internal.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

using exp_internal::ExpNonPositive8;
using exp_internal::kLn2Hi;
using exp_internal::kLn2Lo;
using exp_internal::kLog2e;
using exp_internal::kMinArg;
using exp_internal::kTaylor;

const bool kUseAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;

// MaxFinite over the whole groups of 8 from the start: the largest finite value there
// (-infinity if none); *done = how many values that covered.
__attribute__((target("avx2,fma"))) float MaxFiniteAvx2(const float* x, int64_t n, int64_t* done) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ);
    m = _mm256_max_ps(m, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, finite));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, m);
  float best = -INFINITY;
  for (float v : lanes) best = std::max(best, v);
  *done = i;
  return best;
}

// Argmax from `best` over x[begin, end) by the scalar rule.
inline int64_t ArgmaxScalar(const float* x, int64_t begin, int64_t end, int64_t best) {
  for (int64_t i = begin; i < end; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

// Argmax over the whole groups of 32 from the start: a group where no value beats the best
// so far (an ordered compare, false for NaN, as the scalar rule's) is skipped whole; the
// others run the scalar rule. *done = how many values that covered.
__attribute__((target("avx2,fma"))) int64_t ArgmaxAvx2(const float* x, int64_t n, int64_t* done) {
  int64_t best = 0;
  __m256 b = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 gt = _mm256_or_ps(
        _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_GT_OQ),
                     _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), b, _CMP_GT_OQ)),
        _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), b, _CMP_GT_OQ),
                     _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), b, _CMP_GT_OQ)));
    if (_mm256_movemask_ps(gt) == 0) continue;
    best = ArgmaxScalar(x, i, i + 32, best);
    b = _mm256_set1_ps(x[best]);
  }
  *done = i;
  return best;
}

// The scalar weight of one logit (SamplingWeights' definition).
inline float Weight(float v, float max, float inv_t, float floor) {
  if (!std::isfinite(v)) return 0.0f;
  const float w = ExpNonPositive((v - max) * inv_t);
  return w >= floor && w > 0.0f ? w : 0.0f;
}

// SamplingWeights over the whole groups of 8 from the start: weights written, partial
// sums stored into partial[8], *found = the last non-zero index there (unchanged if none).
// Returns how many values it covered.
__attribute__((target("avx2,fma"))) int64_t SamplingWeightsAvx2(float* x, int64_t n, float max,
                                                                float inv_t, float floor,
                                                                double partial[8], int64_t* found) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  const __m256 vmax = _mm256_set1_ps(max), vinv = _mm256_set1_ps(inv_t);
  const __m256 vfloor = _mm256_set1_ps(floor), zero = _mm256_setzero_ps();
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();  // partials 0-3, 4-7
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ);
    // (v - max) * inv_t, not fused: the scalar form rounds the difference first.
    __m256 w = ExpNonPositive8(_mm256_mul_ps(_mm256_sub_ps(v, vmax), vinv));
    const __m256 ok = _mm256_and_ps(finite, _mm256_and_ps(_mm256_cmp_ps(w, vfloor, _CMP_GE_OQ),
                                                          _mm256_cmp_ps(w, zero, _CMP_GT_OQ)));
    w = _mm256_and_ps(w, ok);
    _mm256_storeu_ps(x + i, w);
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    const int mask = _mm256_movemask_ps(ok);
    if (mask != 0) *found = i + 31 - __builtin_clz(static_cast<unsigned>(mask));
  }
  _mm256_storeu_pd(partial, sum_lo);
  _mm256_storeu_pd(partial + 4, sum_hi);
  return i;
}

}  // namespace

float ExpNonPositive(float x) {
  if (!(x >= kMinArg)) return 0.0f;  // also NaN
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kTaylor[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kTaylor[k]);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

float MaxFinite(const float* x, int64_t n) {
  int64_t i = 0;
  float best = kUseAvx2 ? MaxFiniteAvx2(x, n, &i) : -INFINITY;
  for (; i < n; ++i) {
    if (std::isfinite(x[i])) best = std::max(best, x[i]);
  }
  return best;
}

int64_t ArgmaxIndex(const float* x, int64_t n) {
  int64_t i = 1;
  const int64_t best = kUseAvx2 ? ArgmaxAvx2(x, n, &i) : 0;
  return ArgmaxScalar(x, std::max<int64_t>(i, 1), n, best);
}

double SamplingWeights(float* x, int64_t n, float max, float inv_t, float floor, int64_t* last) {
  double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t found = -1;
  int64_t i = kUseAvx2 ? SamplingWeightsAvx2(x, n, max, inv_t, floor, partial, &found) : 0;
  for (; i < n; ++i) {
    const float w = Weight(x[i], max, inv_t, floor);
    x[i] = w;
    partial[i % 8] += w;
    if (w > 0.0f) found = i;
  }
  *last = found;
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace tandem
