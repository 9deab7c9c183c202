#include "kernels/kv_dtype.h"

#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/half.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

constexpr float kE4M3Max = 448.0f;    // S.1111.110
constexpr float kE5M2Max = 57344.0f;  // S.11110.11
constexpr uint8_t kE4M3MaxCode = 0x7e;
constexpr uint8_t kE5M2MaxCode = 0x7b;
constexpr int kScaleBytes = 4;

// The fp16 bits Widen(c) of kv_dtype.h: the code's value (e4m3: times 2^-8) as an fp16.
inline uint16_t WidenE4M3(uint8_t c) {
  return static_cast<uint16_t>(((c & 0x80u) << 8) | ((c & 0x7fu) << 7));
}
inline uint16_t WidenE5M2(uint8_t c) { return static_cast<uint16_t>(c << 8); }

// Code of |x| (>= 0, not NaN) for a format with `mant` mantissa bits, exponent bias
// `bias`: codes are consecutive integers in the order of their values (a subnormal
// step, then each binade's 2^mant steps), so rounding a magnitude to the nearest
// multiple of its binade's step and adding the binade's first code is the encoding.
uint8_t MagnitudeCode(float a, int mant, int bias, uint8_t max_code) {
  if (a > FLT_MAX) return max_code;  // infinity saturates (ilogb would give INT_MAX)
  const int min_exp = 1 - bias;  // exponent of the smallest normal
  float r;
  int base;
  if (a < std::ldexp(1.0f, min_exp)) {
    r = std::nearbyint(std::ldexp(a, mant - min_exp));  // multiples of the subnormal step
    base = 0;
  } else {
    const int e = std::ilogb(a);
    r = std::nearbyint(std::ldexp(a, mant - e));  // in [2^mant, 2^(mant+1)]
    base = (e - min_exp) << mant;                 // code of 2^e is base + 2^mant
  }
  const float code = static_cast<float>(base) + r;  // exact: below 2^8
  return code >= max_code ? max_code : static_cast<uint8_t>(code);
}

uint8_t EncodeFp8(float x, bool e4m3) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  return sign |
         (e4m3 ? MagnitudeCode(a, 3, 7, kE4M3MaxCode) : MagnitudeCode(a, 2, 15, kE5M2MaxCode));
}

float LoadScale(const uint8_t* p) {
  float m;
  std::memcpy(&m, p, sizeof m);
  return m;
}

void EncodeFp8Head(KvDtype dtype, const float* x, int hd, uint8_t* out) {
  const bool e4m3 = dtype == KvDtype::kFp8E4M3;
  const float top = e4m3 ? kE4M3Max : kE5M2Max;
  float amax = 0.0f;
  bool finite = true;
  for (int d = 0; d < hd; ++d) {
    const float a = std::fabs(x[d]);
    if (!(a <= FLT_MAX)) finite = false;  // NaN or infinity
    amax = a > amax ? a : amax;
  }
  float m;
  if (!finite) {
    m = std::numeric_limits<float>::quiet_NaN();
    std::memset(out, 0, static_cast<size_t>(hd));
  } else if (amax == 0.0f) {
    m = 1.0f;
    std::memset(out, 0, static_cast<size_t>(hd));
  } else {
    const float inv = top / amax;
    for (int d = 0; d < hd; ++d) out[d] = EncodeFp8(x[d] * inv, e4m3);
    m = amax / top;
    if (e4m3) m *= 256.0f;  // Widen gives the e4m3 value times 2^-8
  }
  std::memcpy(out + hd, &m, sizeof m);
}

__attribute__((target("avx2,fma,f16c"))) void DecodeFp8HeadAvx2(bool e4m3, const uint8_t* head,
                                                                int hd, float* out) {
  const float m = LoadScale(head + hd);
  const __m256 vm = _mm256_set1_ps(m);
  const __m128i sign = _mm_set1_epi16(0x80), mag = _mm_set1_epi16(0x7f);
  int d = 0;
  for (; d + 8 <= hd; d += 8) {
    __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + d)));
    w = e4m3 ? _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, sign), 8),
                            _mm_slli_epi16(_mm_and_si128(w, mag), 7))
             : _mm_slli_epi16(w, 8);
    _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_cvtph_ps(w), vm));
  }
  for (; d < hd; ++d) out[d] = Fp16ToFp32(e4m3 ? WidenE4M3(head[d]) : WidenE5M2(head[d])) * m;
}

const bool kHaveAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;

}  // namespace

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kFp8E4M3:
      return "fp8_e4m3";
    case KvDtype::kFp8E5M2:
      return "fp8_e5m2";
  }
  return "?";
}

StatusOr<KvDtype> ParseKvCacheDtype(std::string_view name) {
  if (name == "auto" || name == "fp16" || name == "float16" || name == "half" || name == "f16")
    return KvDtype::kF16;
  if (name == "bf16" || name == "bfloat16") return KvDtype::kBf16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8E4M3;
  if (name == "fp8_e5m2") return KvDtype::kFp8E5M2;
  return InvalidArgumentError("--kv-cache-dtype: unknown type '" + std::string(name) +
                              "'; accepted: auto, fp16, bf16, bfloat16, fp8, fp8_e4m3, fp8_e5m2");
}

int64_t KvHeadBytes(KvDtype dtype, int head_dim) {
  return IsFp8(dtype) ? head_dim + kScaleBytes : 2 * static_cast<int64_t>(head_dim);
}

int64_t KvRowBytes(KvDtype dtype, int64_t dim, int head_dim) {
  return dim / head_dim * KvHeadBytes(dtype, head_dim);
}

void EncodeKvRow(KvDtype dtype, const float* x, int64_t dim, int head_dim, uint8_t* out) {
  switch (dtype) {
    case KvDtype::kF16:
      return Fp32ToFp16Row(x, reinterpret_cast<Fp16Bits*>(out), dim);
    case KvDtype::kBf16:
      return Fp32ToBf16Row(x, reinterpret_cast<Bf16Bits*>(out), dim);
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      for (int64_t h = 0; h < dim / head_dim; ++h)
        EncodeFp8Head(dtype, x + h * head_dim, head_dim, out + h * KvHeadBytes(dtype, head_dim));
      return;
  }
}

void DecodeKvHeadScalar(KvDtype dtype, const uint8_t* head, int head_dim, float* out) {
  switch (dtype) {
    case KvDtype::kF16:
    case KvDtype::kBf16:
      for (int d = 0; d < head_dim; ++d) {
        uint16_t bits;
        std::memcpy(&bits, head + 2 * d, sizeof bits);
        out[d] = dtype == KvDtype::kF16 ? Fp16ToFp32(bits) : Bf16ToFp32(bits);
      }
      return;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const float m = LoadScale(head + head_dim);
      const bool e4m3 = dtype == KvDtype::kFp8E4M3;
      for (int d = 0; d < head_dim; ++d)
        out[d] = Fp16ToFp32(e4m3 ? WidenE4M3(head[d]) : WidenE5M2(head[d])) * m;
      return;
    }
  }
}

void DecodeKvHead(KvDtype dtype, const uint8_t* head, int head_dim, float* out) {
  if (!kHaveAvx2) return DecodeKvHeadScalar(dtype, head, head_dim, out);
  switch (dtype) {
    case KvDtype::kF16:
      return Fp16ToFp32Row(reinterpret_cast<const Fp16Bits*>(head), out, head_dim);
    case KvDtype::kBf16:
      return Bf16ToFp32Row(reinterpret_cast<const Bf16Bits*>(head), out, head_dim);
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      return DecodeFp8HeadAvx2(dtype == KvDtype::kFp8E4M3, head, head_dim, out);
  }
}

float Fp8E4M3ToFp32(uint8_t code) {
  if ((code & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  const int e = (code >> 3) & 0xf, m = code & 7;
  const float a =
      e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (code & 0x80) ? -a : a;
}

float Fp8E5M2ToFp32(uint8_t code) {
  const int e = (code >> 2) & 0x1f, m = code & 3;
  float a;
  if (e == 0x1f) {
    a = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else {
    a = e == 0 ? std::ldexp(static_cast<float>(m), -16) : std::ldexp(1.0f + m / 4.0f, e - 15);
  }
  return (code & 0x80) ? -a : a;
}

uint8_t Fp32ToFp8E4M3(float x) { return EncodeFp8(x, true); }
uint8_t Fp32ToFp8E5M2(float x) { return EncodeFp8(x, false); }

}  // namespace tandem
