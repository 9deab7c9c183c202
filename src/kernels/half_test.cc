#include "kernels/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tandem {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// Independent fp16 decoding through ldexp (no bit tricks).
double Fp16Value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant == 0 ? sign * std::numeric_limits<double>::infinity() : NAN;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// fp32 -> nearest fp16 value (ties to even) computed in double, as a float.
float NearestFp16Value(float x) {
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int frexp_exp = 0;
  std::frexp(a, &frexp_exp);  // a = m * 2^frexp_exp, m in [0.5, 1): floor(log2 a) exactly
  const int e = a == 0 ? -14 : std::max(frexp_exp - 1, -14);
  const double ulp = std::ldexp(1.0, e - 10);
  const double r = std::nearbyint(a / ulp) * ulp;  // default rounding mode: ties to even
  return static_cast<float>(std::copysign(r, static_cast<double>(x)));
}

TEST(HalfTest, Fp16ToFp32IsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const double want = Fp16Value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      // Sign and payload survive in the top mantissa bits.
      EXPECT_EQ(Bits(f), ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(HalfTest, Fp16RoundTripsThroughFp32) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t back = Fp32ToFp16(Fp16ToFp32(static_cast<uint16_t>(h)));
    const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    // Signalling NaNs come back quiet; everything else is unchanged.
    ASSERT_EQ(back, is_nan ? (h | 0x200u) : h) << h;
  }
}

TEST(HalfTest, Fp32ToFp16RoundsToNearestEven) {
  // Every fp32 exponent and sign, with low mantissa bits chosen to hit exact ties,
  // just-below/just-above ties and random bits (13 bits are dropped in the normal range,
  // more for subnormals).
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000};
  std::mt19937 rng(1234);
  for (uint32_t hi = 0; hi < (1u << 19); ++hi) {
    const uint32_t top = hi << 13;
    for (uint32_t low : lows) {
      for (uint32_t variant = 0; variant < 2; ++variant) {
        const uint32_t bits = variant == 0 ? (top | low) : (top | (rng() & 0x1fff));
        const float x = std::bit_cast<float>(bits);
        if (std::isnan(x)) continue;
        const float got = Fp16ToFp32(Fp32ToFp16(x));
        const float want = NearestFp16Value(x);
        ASSERT_EQ(Bits(got), Bits(want)) << std::hex << "x bits 0x" << bits;
      }
    }
  }
}

TEST(HalfTest, Fp32ToFp16EdgeCases) {
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65519.99f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // tie rounds to even = inf
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 ulp tie -> even (2)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  const uint16_t nan = Fp32ToFp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_EQ(Fp32ToFp16(std::bit_cast<float>(0xff800001u)), 0xfe00);  // sNaN -> quiet, signed
}

TEST(HalfTest, Bf16RoundTripsAndRounds) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(h));
    ASSERT_EQ(Bits(f), h << 16);
    const bool is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    ASSERT_EQ(Fp32ToBf16(f), is_nan ? (h | 0x40u) : h) << h;
  }
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);  // above tie
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX -> inf
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // payload lost, quiet
}

TEST(HalfTest, RowConversionsMatchScalar) {
  const float src[5] = {0.1f, -2.5f, 1e-6f, 70000.0f, -0.0f};
  uint16_t h[5], b[5];
  float back_h[5], back_b[5];
  Fp32ToFp16Row(src, h, 5);
  Fp32ToBf16Row(src, b, 5);
  Fp16ToFp32Row(h, back_h, 5);
  Bf16ToFp32Row(b, back_b, 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(h[i], Fp32ToFp16(src[i]));
    EXPECT_EQ(b[i], Fp32ToBf16(src[i]));
    EXPECT_EQ(Bits(back_h[i]), Bits(Fp16ToFp32(h[i])));
    EXPECT_EQ(Bits(back_b[i]), Bits(Bf16ToFp32(b[i])));
  }
}

// The row functions take the F16C path where the CPU has it (the machines we run on):
// every fp16 value, and a sweep of fp32 bit patterns covering every exponent, must
// convert exactly as the scalar reference does. NaNs only need to stay NaNs of the same
// sign (F16C quietens a signalling NaN; the scalar fp16 -> fp32 keeps it as it is).
TEST(HalfTest, RowConversionsMatchScalarEverywhere) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  Fp16ToFp32Row(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float want = Fp16ToFp32(all[h]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(wide[h])) << h;
      ASSERT_EQ(std::signbit(wide[h]), std::signbit(want)) << h;
    } else {
      ASSERT_EQ(Bits(wide[h]), Bits(want)) << h;
    }
  }
  std::vector<float> sweep;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4093)
    sweep.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (uint32_t special : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x477fefffu,
                           0x477ff000u, 0x33000000u, 0x33000001u, 0x387fc000u}) {
    sweep.push_back(std::bit_cast<float>(special));
  }
  std::vector<uint16_t> narrow(sweep.size());
  Fp32ToFp16Row(sweep.data(), narrow.data(), static_cast<int64_t>(sweep.size()));
  for (size_t i = 0; i < sweep.size(); ++i) {
    const uint16_t want = Fp32ToFp16(sweep[i]);
    if (std::isnan(sweep[i])) {
      ASSERT_EQ(narrow[i] & 0x7c00, 0x7c00) << i;
      ASSERT_NE(narrow[i] & 0x3ff, 0) << i;
      ASSERT_EQ(narrow[i] & 0x8000, want & 0x8000) << i;
    } else {
      ASSERT_EQ(narrow[i], want) << "fp32 bits " << Bits(sweep[i]);
    }
  }
}

}  // namespace
}  // namespace tandem
