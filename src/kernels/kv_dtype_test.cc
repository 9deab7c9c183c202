// The KV cache element types: the fp8 codecs against their definitions (every code,
// rounding to nearest even, saturation), the row encoder's error bound, DecodeKvHead's
// AVX2 path against the scalar one bit for bit, and the attention row kernels over every
// dtype (an f16 cache through the Kv entry points gives the F16 kernels' bits; each
// group head equals the one-head call; results near a double-precision reference).
#include "kernels/kv_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_rows.h"
#include "kernels/half.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

const KvDtype kAll[] = {KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2};

bool IsNanCode(uint8_t c, bool e4m3) { return e4m3 ? (c & 0x7f) == 0x7f : (c & 0x7f) > 0x7c; }

TEST(KvDtypeTest, ParsesVllmNames) {
  EXPECT_EQ(*ParseKvCacheDtype("auto"), KvDtype::kF16);
  EXPECT_EQ(*ParseKvCacheDtype("fp16"), KvDtype::kF16);
  EXPECT_EQ(*ParseKvCacheDtype("bfloat16"), KvDtype::kBf16);
  EXPECT_EQ(*ParseKvCacheDtype("bf16"), KvDtype::kBf16);
  EXPECT_EQ(*ParseKvCacheDtype("fp8"), KvDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3"), KvDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e5m2"), KvDtype::kFp8E5M2);
  const auto bad = ParseKvCacheDtype("fp8_inc");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp8_inc"), std::string::npos);
  EXPECT_NE(bad.status().message().find("auto, fp16, bf16"), std::string::npos);
  EXPECT_STREQ(KvDtypeName(KvDtype::kFp8E5M2), "fp8_e5m2");
}

TEST(KvDtypeTest, Sizes) {
  EXPECT_EQ(KvHeadBytes(KvDtype::kF16, 64), 128);
  EXPECT_EQ(KvHeadBytes(KvDtype::kBf16, 64), 128);
  EXPECT_EQ(KvHeadBytes(KvDtype::kFp8E4M3, 64), 68);  // codes + a float multiplier
  EXPECT_EQ(KvRowBytes(KvDtype::kFp8E5M2, 256, 64), 4 * 68);
  EXPECT_EQ(KvRowBytes(KvDtype::kF16, 256, 64), 512);
}

TEST(KvDtypeTest, Fp8CodesDecodeToTheirValues) {
  EXPECT_EQ(Fp8E4M3ToFp32(0x38), 1.0f);
  EXPECT_EQ(Fp8E4M3ToFp32(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFp32(0xfe), -448.0f);
  EXPECT_EQ(Fp8E4M3ToFp32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(Fp8E4M3ToFp32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(Fp8E4M3ToFp32(0x3d), 1.625f);
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFp32(0x7f)));
  EXPECT_EQ(Fp8E5M2ToFp32(0x3c), 1.0f);
  EXPECT_EQ(Fp8E5M2ToFp32(0x7b), 57344.0f);
  EXPECT_EQ(Fp8E5M2ToFp32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(Fp8E5M2ToFp32(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Fp8E5M2ToFp32(0x7d)));
  // e5m2 is the top byte of the fp16 of the same value.
  for (int c = 0; c < 256; ++c) {
    if (IsNanCode(static_cast<uint8_t>(c), false)) continue;
    EXPECT_EQ(Fp8E5M2ToFp32(static_cast<uint8_t>(c)), Fp16ToFp32(static_cast<uint16_t>(c << 8)))
        << c;
  }
}

TEST(KvDtypeTest, Fp8EncodeRoundTripsEveryFiniteCode) {
  for (bool e4m3 : {true, false}) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      if (IsNanCode(code, e4m3) || (!e4m3 && (c & 0x7f) == 0x7c)) continue;
      const float x = e4m3 ? Fp8E4M3ToFp32(code) : Fp8E5M2ToFp32(code);
      EXPECT_EQ(e4m3 ? Fp32ToFp8E4M3(x) : Fp32ToFp8E5M2(x), code)
          << (e4m3 ? "e4m3 " : "e5m2 ") << c;
    }
  }
}

// Every positive value between two neighbouring codes goes to the nearer one; the
// midpoint to the code with an even last bit; past the top code, the top code.
TEST(KvDtypeTest, Fp8EncodeRoundsToNearestEvenAndSaturates) {
  for (bool e4m3 : {true, false}) {
    const uint8_t top = e4m3 ? 0x7e : 0x7b;
    auto dec = [&](int c) {
      return e4m3 ? Fp8E4M3ToFp32(static_cast<uint8_t>(c)) : Fp8E5M2ToFp32(static_cast<uint8_t>(c));
    };
    auto enc = [&](float x) { return e4m3 ? Fp32ToFp8E4M3(x) : Fp32ToFp8E5M2(x); };
    for (int c = 0; c < top; ++c) {
      const float a = dec(c), b = dec(c + 1);
      const float mid = (a + b) / 2;  // exact: one more bit than the format has
      EXPECT_EQ(enc(mid), (c % 2 == 0) ? c : c + 1) << c;
      EXPECT_EQ(enc(std::nextafter(mid, 0.0f)), c) << c;
      EXPECT_EQ(enc(std::nextafter(mid, 1e9f)), c + 1) << c;
      EXPECT_EQ(enc(-std::nextafter(mid, 0.0f)), 0x80 | c) << c;
    }
    EXPECT_EQ(enc(dec(top) * 1.03f), top);
    EXPECT_EQ(enc(1e30f), top);
    EXPECT_EQ(enc(-1e30f), 0x80 | top);
    EXPECT_EQ(enc(std::numeric_limits<float>::infinity()), top);
    EXPECT_EQ(enc(1e-30f), 0);
    EXPECT_EQ(enc(-0.0f), 0x80);
    EXPECT_EQ(enc(std::nanf("")) & 0x7f, 0x7f);
  }
}

std::vector<float> RandomHeads(int n, float amp, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, amp);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  return x;
}

// Each value within half a step of its binade (relative 2^-4 for e4m3, 2^-3 for e5m2),
// or half the smallest step below the normal range, of the head's scale.
TEST(KvDtypeTest, RowEncodingErrorBound) {
  for (KvDtype dtype : kAll) {
    for (int hd : {8, 20, 64, 256}) {
      for (float amp : {1e-4f, 1.0f, 300.0f}) {
        const int heads = 3;
        const std::vector<float> x =
            RandomHeads(heads * hd, amp, static_cast<uint32_t>(hd * 7 + amp));
        std::vector<uint8_t> row(static_cast<size_t>(KvRowBytes(dtype, heads * hd, hd)));
        EncodeKvRow(dtype, x.data(), heads * hd, hd, row.data());
        std::vector<float> y(static_cast<size_t>(hd));
        for (int h = 0; h < heads; ++h) {
          DecodeKvHead(dtype, row.data() + h * KvHeadBytes(dtype, hd), hd, y.data());
          float amax = 0;
          for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(x[h * hd + d]));
          for (int d = 0; d < hd; ++d) {
            const float v = x[h * hd + d];
            float bound;
            switch (dtype) {
              case KvDtype::kF16:
                bound = std::fabs(v) * 0x1p-11f + 0x1p-25f;
                break;
              case KvDtype::kBf16:
                bound = std::fabs(v) * 0x1p-8f;
                break;
              case KvDtype::kFp8E4M3:
                bound = std::fabs(v) * 0x1p-4f + amax / 448 * 0x1p-10f;
                break;
              default:
                bound = std::fabs(v) * 0x1p-3f + amax / 57344 * 0x1p-17f;
                break;
            }
            EXPECT_LE(std::fabs(y[d] - v), bound * 1.0001f)
                << KvDtypeName(dtype) << " hd " << hd << " amp " << amp << " value " << v;
          }
        }
      }
    }
  }
}

TEST(KvDtypeTest, Fp8HeadMaxIsExactAndZeroHeadsDecodeToZero) {
  for (KvDtype dtype : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    std::vector<float> x(16, 0.0f);
    std::vector<uint8_t> row(static_cast<size_t>(KvRowBytes(dtype, 16, 16)));
    std::vector<float> y(16);
    EncodeKvRow(dtype, x.data(), 16, 16, row.data());
    DecodeKvHead(dtype, row.data(), 16, y.data());
    for (float v : y) EXPECT_EQ(v, 0.0f);
    x[3] = -2.5f;  // a power-of-two-friendly amax: the top code times the scale is exact
    x[5] = 1.25f;
    EncodeKvRow(dtype, x.data(), 16, 16, row.data());
    DecodeKvHead(dtype, row.data(), 16, y.data());
    EXPECT_EQ(y[3], -2.5f) << KvDtypeName(dtype);
  }
}

// A NaN or an infinity in a head poisons that head (as it would through an fp16 cache),
// and only that head.
TEST(KvDtypeTest, NonFiniteValuesReachTheReader) {
  for (KvDtype dtype : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(32, 0.5f);
      x[2] = bad;
      std::vector<uint8_t> row(static_cast<size_t>(KvRowBytes(dtype, 32, 16)));
      EncodeKvRow(dtype, x.data(), 32, 16, row.data());
      std::vector<float> y(16);
      DecodeKvHead(dtype, row.data(), 16, y.data());
      EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[2]));
      DecodeKvHead(dtype, row.data() + KvHeadBytes(dtype, 16), 16, y.data());
      EXPECT_EQ(y[0], 0.5f);
    }
  }
}

TEST(KvDtypeTest, DecodeVectorPathGivesTheScalarBits) {
  std::printf("kernels at %s\n", IsaLevelName(KernelIsaLevel()));
  for (KvDtype dtype : kAll) {
    for (int hd : {8, 20, 64, 256}) {
      const std::vector<float> x = RandomHeads(hd, 3.0f, static_cast<uint32_t>(hd));
      std::vector<uint8_t> row(static_cast<size_t>(KvHeadBytes(dtype, hd)));
      EncodeKvRow(dtype, x.data(), hd, hd, row.data());
      std::vector<float> a(static_cast<size_t>(hd)), b(static_cast<size_t>(hd));
      DecodeKvHead(dtype, row.data(), hd, a.data());
      DecodeKvHeadScalar(dtype, row.data(), hd, b.data());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << KvDtypeName(dtype) << " " << hd;
    }
  }
  // The 16-bit encoders are the half.h conversions.
  const std::vector<float> x = RandomHeads(64, 2.0f, 9);
  std::vector<uint16_t> ref(64);
  std::vector<uint8_t> row(128);
  Fp32ToFp16Row(x.data(), ref.data(), 64);
  EncodeKvRow(KvDtype::kF16, x.data(), 64, 64, row.data());
  EXPECT_EQ(0, std::memcmp(ref.data(), row.data(), 128));
  Fp32ToBf16Row(x.data(), ref.data(), 64);
  EncodeKvRow(KvDtype::kBf16, x.data(), 64, 64, row.data());
  EXPECT_EQ(0, std::memcmp(ref.data(), row.data(), 128));
}

// n rows of `heads` heads; scores and weighted sums for every dtype.
TEST(KvDtypeTest, AttentionRowKernelsOverEveryDtype) {
  for (KvDtype dtype : kAll) {
    for (int hd : {16, 20, 64, 128}) {
      for (int g : {1, 3, 6}) {
        const int64_t n = 37;
        const int64_t hb = KvHeadBytes(dtype, hd);
        std::vector<std::vector<uint8_t>> k(n), v(n);
        std::vector<const uint8_t*> kp(n), vp(n);
        for (int64_t j = 0; j < n; ++j) {
          const std::vector<float> kx = RandomHeads(hd, 1.0f, static_cast<uint32_t>(j * 3 + hd));
          const std::vector<float> vx =
              RandomHeads(hd, 1.0f, static_cast<uint32_t>(j * 5 + hd + 1));
          k[j].resize(hb);
          v[j].resize(hb);
          EncodeKvRow(dtype, kx.data(), hd, hd, k[j].data());
          EncodeKvRow(dtype, vx.data(), hd, hd, v[j].data());
          kp[j] = k[j].data();
          vp[j] = v[j].data();
        }
        std::vector<std::vector<float>> q(g), p(g), s(g), o(g), s1(g), o1(g);
        std::vector<const float*> qh(g), ph(g);
        std::vector<float*> sh(g), oh(g);
        for (int h = 0; h < g; ++h) {
          q[h] = RandomHeads(hd, 1.0f, static_cast<uint32_t>(100 + h));
          p[h] = RandomHeads(static_cast<int>(n), 0.1f, static_cast<uint32_t>(200 + h));
          s[h].assign(n, NAN);
          o[h].assign(hd, NAN);
          s1[h].assign(n, NAN);
          o1[h].assign(hd, NAN);
          qh[h] = q[h].data();
          ph[h] = p[h].data();
          sh[h] = s[h].data();
          oh[h] = o[h].data();
        }
        DotKvRowsGroup(dtype, qh.data(), g, kp.data(), n, hd, 0.5f, sh.data());
        WeightedSumKvRowsGroup(dtype, ph.data(), g, vp.data(), n, hd, oh.data());
        std::vector<float> kd(hd), vd(hd);
        for (int h = 0; h < g; ++h) {
          SCOPED_TRACE(::testing::Message()
                       << KvDtypeName(dtype) << " hd " << hd << " g " << g << " head " << h);
          float* s1p = s1[h].data();
          float* o1p = o1[h].data();
          DotKvRowsGroup(dtype, &qh[h], 1, kp.data(), n, hd, 0.5f, &s1p);
          WeightedSumKvRowsGroup(dtype, &ph[h], 1, vp.data(), n, hd, &o1p);
          EXPECT_EQ(s[h], s1[h]);
          EXPECT_EQ(o[h], o1[h]);
          std::vector<double> want_o(hd, 0.0);
          for (int64_t j = 0; j < n; ++j) {
            DecodeKvHeadScalar(dtype, kp[j], hd, kd.data());
            DecodeKvHeadScalar(dtype, vp[j], hd, vd.data());
            double dot = 0;
            for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[h][d]) * kd[d];
            EXPECT_NEAR(s[h][j], 0.5 * dot, 1e-4 * (1 + std::fabs(dot)));
            for (int d = 0; d < hd; ++d) want_o[d] += static_cast<double>(p[h][j]) * vd[d];
          }
          for (int d = 0; d < hd; ++d)
            EXPECT_NEAR(o[h][d], want_o[d], 1e-4 * (1 + std::fabs(want_o[d])));
        }
        if (dtype == KvDtype::kF16) {  // the f16 entry points: the same bits
          std::vector<const uint16_t*> k16(n), v16(n);
          for (int64_t j = 0; j < n; ++j) {
            k16[j] = reinterpret_cast<const uint16_t*>(kp[j]);
            v16[j] = reinterpret_cast<const uint16_t*>(vp[j]);
          }
          DotF16RowsGroup(qh.data(), g, k16.data(), n, hd, 0.5f, sh.data());
          WeightedSumF16RowsGroup(ph.data(), g, v16.data(), n, hd, oh.data());
          for (int h = 0; h < g; ++h) {
            EXPECT_EQ(s[h], s1[h]) << "hd " << hd << " head " << h;
            EXPECT_EQ(o[h], o1[h]) << "hd " << hd << " head " << h;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem
