#include "kernels/half.h"

#include <immintrin.h>

#include <bit>

#include "kernels/isa.h"

namespace tandem {
namespace {

// fp16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
// fp32: 1 sign bit, 8 exponent bits (bias 127), 23 mantissa bits.
constexpr uint32_t kF32ExpMask = 0x7f800000u;
constexpr uint32_t kF32MantMask = 0x007fffffu;

}  // namespace

float Fp16ToFp32(Fp16Bits h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    // Inf or NaN: all-ones exponent; the payload moves to the top of the fp32 mantissa.
    bits = sign | kF32ExpMask | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: value = mant * 2^-24. Normalize so the leading one becomes implicit.
    int32_t e = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

Fp16Bits Fp32ToFp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > kF32ExpMask) {
    // NaN: quiet it and keep the top 9 payload bits.
    return static_cast<Fp16Bits>(sign | 0x7e00u | ((abs & kF32MantMask) >> 13));
  }
  if (abs >= 0x477ff000u) {
    // >= 65520 = the midpoint between the largest finite fp16 (65504) and 2^16: rounds
    // to inf (ties-to-even goes up since 65504 has an odd mantissa). Also covers inf.
    return static_cast<Fp16Bits>(sign | 0x7c00u);
  }
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127;  // unbiased fp32 exponent
  if (exp >= -14) {
    // Normal fp16 range. Drop 13 mantissa bits with round-to-nearest-even; a carry out
    // of the mantissa correctly bumps the exponent (and cannot reach inf, see above).
    const uint32_t rebiased = abs - ((127u - 15u) << 23);
    const uint32_t round_bit = 1u << 12;
    const uint32_t lsb = (rebiased >> 13) & 1u;
    return static_cast<Fp16Bits>(sign | ((rebiased + (round_bit - 1) + lsb) >> 13));
  }
  if (exp < -25) {
    // Below half the smallest subnormal (2^-25): rounds to zero. Exactly 2^-25 is a tie
    // between 0 and the smallest subnormal and goes to 0 (even) through the branch below.
    return static_cast<Fp16Bits>(sign);
  }
  // Subnormal fp16: value = m * 2^-24 with m in [0, 1024]. Shift the full significand
  // (implicit one included) right so that its units are 2^-24, rounding to nearest even.
  const uint32_t significand = (abs & kF32MantMask) | 0x00800000u;  // value = sig * 2^(exp-23)
  const uint32_t shift = static_cast<uint32_t>(-exp - 1);           // 14..24: (exp - 23) -> -24
  const uint32_t kept = significand >> shift;
  const uint32_t rem = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded = kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
  // rounded == 1024 is the smallest normal (exponent field 1, mantissa 0): still correct.
  return static_cast<Fp16Bits>(sign | rounded);
}

float Bf16ToFp32(Bf16Bits h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

Bf16Bits Fp32ToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > kF32ExpMask) {
    // NaN: truncating could clear every payload bit and make an inf; force it quiet.
    return static_cast<Bf16Bits>((bits >> 16) | 0x40u);
  }
  // Round to nearest even; a carry into the exponent rounds up to the next binade or inf.
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<Bf16Bits>((bits + 0x7fffu + lsb) >> 16);
}

namespace {

// F16C converts exactly as the scalar code does: fp16 -> fp32 is exact, and fp32 ->
// fp16 rounds to nearest even with NaNs kept quiet (half_test checks every fp16 value
// and a sweep of fp32 values against the scalar functions).
__attribute__((target("avx,f16c"))) void Fp16ToFp32RowF16c(const Fp16Bits* src, float* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

__attribute__((target("avx,f16c"))) void Fp32ToFp16RowF16c(const float* src, Fp16Bits* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

const bool kHaveF16c = KernelIsaLevel() >= IsaLevel::kAvx2;  // the avx2 level includes F16C

}  // namespace

void Fp16ToFp32Row(const Fp16Bits* src, float* dst, int64_t n_elems) {
  if (kHaveF16c) return Fp16ToFp32RowF16c(src, dst, n_elems);
  for (int64_t i = 0; i < n_elems; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void Fp32ToFp16Row(const float* src, Fp16Bits* dst, int64_t n_elems) {
  if (kHaveF16c) return Fp32ToFp16RowF16c(src, dst, n_elems);
  for (int64_t i = 0; i < n_elems; ++i) dst[i] = Fp32ToFp16(src[i]);
}

void Bf16ToFp32Row(const Bf16Bits* src, float* dst, int64_t n_elems) {
  for (int64_t i = 0; i < n_elems; ++i) dst[i] = Bf16ToFp32(src[i]);
}

void Fp32ToBf16Row(const float* src, Bf16Bits* dst, int64_t n_elems) {
  for (int64_t i = 0; i < n_elems; ++i) dst[i] = Fp32ToBf16(src[i]);
}

}  // namespace tandem
