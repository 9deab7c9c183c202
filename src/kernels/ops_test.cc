#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/exp_internal.h"
#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/sampling_ops.h"

namespace tandem {
namespace {

// GGML's GELU, one value at a time: fp16 in, tanh formula in float, fp16 out, with the
// same cut-offs at +-10 (the definition GeluMul's table and vector path must match).
float GeluReference(float v) {
  if (v <= -10.0f) return 0.0f;
  if (v >= 10.0f) return v;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float h = Fp16ToFp32(Fp32ToFp16(v));
  const float g = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + 0.044715f * h * h)));
  return Fp16ToFp32(Fp32ToFp16(g));
}

TEST(OpsTest, GeluMulMatchesReferenceBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> wide(0.0f, 4.0f);
  std::vector<float> x, y;
  for (float v : {-10.0f, -9.999f, -10.001f, 10.0f, 9.999f, 10.001f, 0.0f, -0.0f, 1e-8f, 65504.0f,
                  70000.0f, -70000.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
    x.push_back(v);
  }
  for (int i = 0; i < 4093; ++i) x.push_back(wide(rng));  // odd length: vector body and tail
  for (size_t i = 0; i < x.size(); ++i) y.push_back(0.5f + static_cast<float>(i % 7));
  std::vector<float> got = x;
  GeluMul(got.data(), y.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = GeluReference(x[i]) * y[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "x = " << x[i];
  }
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()}, one = {1.0f};
  GeluMul(nan.data(), one.data(), 1);
  EXPECT_TRUE(std::isnan(nan[0]));
}

// Rope's rotation written out per pair, angles computed as ggml does (theta_i =
// pos * scale * base^(-2i/dims), by repeated multiplication).
TEST(OpsTest, RopeInTwoStepsEqualsRope) {
  for (bool neox : {false, true}) {
    for (int64_t pos : {0, 1, 17, 4095, 100000}) {
      std::vector<float> a(256), b(256);
      std::mt19937 rng(static_cast<uint32_t>(pos));
      std::uniform_real_distribution<float> u(-3.0f, 3.0f);
      for (float& v : a) v = u(rng);
      b = a;
      Rope(a.data(), 256, 128, pos, 10000.0f, 1.0f, neox);
      std::vector<float> cos(64), sin(64);
      RopeAngles(128, pos, 10000.0f, 1.0f, cos.data(), sin.data());
      RopeApply(b.data(), 128, cos.data(), sin.data(), neox);
      for (int d = 0; d < 256; ++d)
        ASSERT_EQ(std::bit_cast<uint32_t>(a[d]), std::bit_cast<uint32_t>(b[d])) << d;
      // A known value: pair 0 rotates by exactly pos radians.
      const int j = neox ? 64 : 1;
      std::vector<float> c(256, 0.0f);
      c[0] = 1.0f;
      RopeApply(c.data(), 128, cos.data(), sin.data(), neox);
      EXPECT_NEAR(c[0], std::cos(static_cast<double>(pos)), 1e-3);
      EXPECT_NEAR(c[j], std::sin(static_cast<double>(pos)), 1e-3);
      // Dims past rot_dims are left alone.
      for (int d = 128; d < 256; ++d) ASSERT_EQ(a[d], b[d]);
    }
  }
}

// Frequency factors of 1 give RopeAngles' bits; a factor f divides pair i's angle by f.
TEST(OpsTest, RopeFactorsDivideEachPairsAngle) {
  std::vector<float> ones(64, 1.0f), factors(64);
  for (int i = 0; i < 64; ++i) factors[i] = 1.0f + static_cast<float>(i % 5);
  for (int64_t pos : {0, 3, 4095, 100000}) {
    std::vector<float> c0(64), s0(64), c1(64), s1(64), c2(64), s2(64);
    RopeAngles(128, pos, 500000.0f, 1.0f, c0.data(), s0.data());
    RopeAnglesFactors(128, pos, 500000.0f, 1.0f, ones.data(), c1.data(), s1.data());
    RopeAnglesFactors(128, pos, 500000.0f, 1.0f, factors.data(), c2.data(), s2.data());
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(c0[i]), std::bit_cast<uint32_t>(c1[i])) << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(s0[i]), std::bit_cast<uint32_t>(s1[i])) << i;
      const double angle = static_cast<double>(pos) * std::pow(500000.0, -2.0 * i / 128) / factors[i];
      EXPECT_NEAR(c2[i], std::cos(angle), 2e-3 * (1 + std::fabs(angle) * 1e-4)) << i;
    }
  }
}

// The attention kernels against plain double-precision loops, for head sizes that take
// the 64-wide, the 8-wide and the scalar paths, and key counts with and without a tail
// of the four-key loop. Tolerance: float accumulation of hd products of values <= 2 in
// magnitude, relative 1e-5 of the sum of |terms| (double reference).
// YaRN: below corr_low a pair keeps the extrapolated angle p·base^(-2i/d), above
// corr_high it takes the interpolated one (times freq_scale), linearly mixed between;
// cos and sin carry attn_factor·(1 + 0.1·ln(1/freq_scale)). Without YaRN (ext 0,
// attn 1, scale 1) the angles are RopeAngles' to a few ulp.
TEST(OpsTest, RopeYarnRampsBetweenExtrapolationAndInterpolation) {
  const int d = 32, half = d / 2;
  const float base = 10000.0f, scale = 0.25f, low = 3.0f, high = 9.0f, attn = 0.9f;
  const int64_t pos = 77;
  std::vector<float> cos(half), sin(half);
  RopeAnglesYarn(d, pos, base, scale, 1.0f, attn, low, high, cos.data(), sin.data());
  const double mscale = attn * (1.0 + 0.1 * std::log(1.0 / scale));
  for (int i = 0; i < half; ++i) {
    const double extrap = pos * std::pow(static_cast<double>(base), -2.0 * i / d);
    const double ramp = 1.0 - std::min(1.0, std::max(0.0, (i - static_cast<double>(low)) / (high - low)));
    const double theta = extrap * scale * (1 - ramp) + extrap * ramp;
    EXPECT_NEAR(cos[i], std::cos(theta) * mscale, 2e-4) << i;
    EXPECT_NEAR(sin[i], std::sin(theta) * mscale, 2e-4) << i;
    if (i <= low) {
      EXPECT_NEAR(theta, extrap, 1e-9) << "pure extrapolation below corr_low";
    }
    if (i >= high) {
      EXPECT_NEAR(theta, extrap * scale, 1e-9) << "pure interpolation above corr_high";
    }
  }
  std::vector<float> c0(half), s0(half);
  RopeAnglesYarn(d, pos, base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, cos.data(), sin.data());
  RopeAngles(d, pos, base, 1.0f, c0.data(), s0.data());
  for (int i = 0; i < half; ++i) {
    EXPECT_NEAR(cos[i], c0[i], 1e-5);
    EXPECT_NEAR(sin[i], s0[i], 1e-5);
  }
}

TEST(OpsTest, AttentionRowKernelsMatchReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int hd : {256, 72, 12}) {
    for (int64_t n : {1, 4, 7, 33}) {
      std::vector<std::vector<uint16_t>> k(n, std::vector<uint16_t>(hd)),
          v(n, std::vector<uint16_t>(hd));
      std::vector<const uint16_t*> kp, vp;
      for (int64_t j = 0; j < n; ++j) {
        for (int d = 0; d < hd; ++d) {
          k[j][d] = Fp32ToFp16(u(rng));
          v[j][d] = Fp32ToFp16(u(rng));
        }
        kp.push_back(k[j].data());
        vp.push_back(v[j].data());
      }
      std::vector<float> q(hd), p(n), scores(n), out(hd, 123.0f);
      for (float& x : q) x = u(rng);
      for (float& x : p) x = u(rng) * 0.5f;
      DotF16Rows(q.data(), kp.data(), n, hd, 0.25f, scores.data());
      WeightedSumF16Rows(p.data(), vp.data(), n, hd, out.data());
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, mag = 0;
        for (int d = 0; d < hd; ++d) {
          want += static_cast<double>(q[d]) * Fp16ToFp32(k[j][d]);
          mag += std::fabs(static_cast<double>(q[d]) * Fp16ToFp32(k[j][d]));
        }
        ASSERT_NEAR(scores[j], 0.25 * want, 0.25 * mag * 1e-5)
            << "hd " << hd << " n " << n << " j " << j;
      }
      for (int d = 0; d < hd; ++d) {
        double want = 0, mag = 0;
        for (int64_t j = 0; j < n; ++j) {
          want += static_cast<double>(p[j]) * Fp16ToFp32(v[j][d]);
          mag += std::fabs(static_cast<double>(p[j]) * Fp16ToFp32(v[j][d]));
        }
        ASSERT_NEAR(out[d], want, mag * 1e-5 + 1e-30) << "hd " << hd << " n " << n << " d " << d;
      }
    }
  }
}

// The GQA group kernels give every head exactly the one-head kernels' bits.
TEST(OpsTest, GroupAttentionKernelsEqualOneHeadKernels) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int hd : {256, 48, 72, 12}) {
    for (int g : {1, 2, 3, 4, 5, 8}) {
      const int64_t n = 37;
      std::vector<std::vector<uint16_t>> kv(2 * n, std::vector<uint16_t>(hd));
      std::vector<const uint16_t*> kp, vp;
      for (int64_t j = 0; j < 2 * n; ++j) {
        for (auto& x : kv[j]) x = Fp32ToFp16(u(rng));
        (j < n ? kp : vp).push_back(kv[j].data());
      }
      std::vector<std::vector<float>> q(g, std::vector<float>(hd)), p(g, std::vector<float>(n));
      std::vector<std::vector<float>> scores(g, std::vector<float>(n)), out(g, std::vector<float>(hd));
      std::vector<const float*> qp, pp;
      std::vector<float*> sp, op;
      for (int h = 0; h < g; ++h) {
        for (float& x : q[h]) x = u(rng);
        for (float& x : p[h]) x = u(rng);
        qp.push_back(q[h].data());
        pp.push_back(p[h].data());
        sp.push_back(scores[h].data());
        op.push_back(out[h].data());
      }
      DotF16RowsGroup(qp.data(), g, kp.data(), n, hd, 0.125f, sp.data());
      WeightedSumF16RowsGroup(pp.data(), g, vp.data(), n, hd, op.data());
      for (int h = 0; h < g; ++h) {
        std::vector<float> s1(n), o1(hd);
        DotF16Rows(q[h].data(), kp.data(), n, hd, 0.125f, s1.data());
        WeightedSumF16Rows(p[h].data(), vp.data(), n, hd, o1.data());
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_EQ(std::bit_cast<uint32_t>(scores[h][j]), std::bit_cast<uint32_t>(s1[j]))
              << "hd " << hd << " g " << g << " h " << h << " j " << j;
        }
        for (int d = 0; d < hd; ++d) {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[h][d]), std::bit_cast<uint32_t>(o1[d]))
              << "hd " << hd << " g " << g << " h " << h << " d " << d;
        }
      }
    }
  }
}

TEST(OpsTest, SoftmaxSumsToOneAndKeepsOrder) {
  std::vector<float> x = {1.0f, 3.0f, -2.0f, 3.0f, 1000.0f, -1000.0f};
  Softmax(x.data(), static_cast<int64_t>(x.size()));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(x[4], 1.0f, 1e-6);
  EXPECT_EQ(x[1], x[3]);
}

TEST(OpsTest, SoftmaxGivesMaskedPositionsZero) {
  std::vector<float> x = {0.5f, -INFINITY, 2.0f, -INFINITY};
  Softmax(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_NEAR(x[0] + x[2], 1.0f, 1e-6);
}

// ggml_vec_dot_f32's order on AVX2, written out lane by lane: four accumulators of 8
// lanes over 32-value steps (fused multiply-adds), folded (0+2)+(1+3), the 8 lanes
// summed (l+4) then (0+2)+(1+3) pairwise, the remainder added one by one.
float GgmlOrderDot(const std::vector<float>& a, const std::vector<float>& b) {
  const int64_t n = static_cast<int64_t>(a.size()), np = n & ~int64_t{31};
  float acc[4][8] = {};
  for (int64_t i = 0; i < np; i += 32)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 8; ++l) acc[j][l] = std::fma(a[i + 8 * j + l], b[i + 8 * j + l], acc[j][l]);
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float sum = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
  for (int64_t i = np; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

TEST(OpsTest, DotF32GgmlKeepsGgmlsOrderBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int n : {5, 32, 64, 70, 128, 200}) {
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(DotF32Ggml(a.data(), b.data(), n)),
              std::bit_cast<uint32_t>(GgmlOrderDot(a, b)))
        << n;
  }
}

TEST(OpsTest, DotF32SgemmKeepsTinyBlasOrderBitForBit) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int n : {8, 64, 256, 70}) {
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
    float want;
    if (n % 8 != 0) {
      want = GgmlOrderDot(a, b);  // tinyBLAS declines such a length
    } else {
      float acc[8] = {};
      for (int i = 0; i < n; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
      want = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(DotF32Sgemm(a.data(), b.data(), n)), std::bit_cast<uint32_t>(want)) << n;
  }
}

// ggml_vec_dot_bf16's AVX2 order written out: four 8-lane FMA accumulators over 32-value
// steps, (0+2)+(1+3), the 8-lane sum, the rest in double.
TEST(OpsTest, DotBf16GgmlKeepsGgmlsOrderBitForBit) {
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int n : {32, 256, 70}) {
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
    float c[4][8] = {};
    int i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 8; ++l) c[j][l] = std::fma(a[i + 8 * j + l], b[i + 8 * j + l], c[j][l]);
      }
    }
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
    double sum = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    for (; i < n; ++i) {
      volatile float p = a[i] * b[i];
      sum += p;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(DotBf16Ggml(a.data(), b.data(), n)),
              std::bit_cast<uint32_t>(static_cast<float>(sum)))
        << n;
  }
}

TEST(OpsTest, IndexerScoresAreReluWeightedHeadSums) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int heads = 3, hd = 64, rows = 5;
  std::vector<float> q(heads * hd), w = {0.5f, -1.25f, 2.0f};
  for (float& v : q) v = dist(rng);
  std::vector<std::vector<uint16_t>> k(rows, std::vector<uint16_t>(hd));
  std::vector<const uint16_t*> k_rows;
  for (auto& row : k) {
    for (uint16_t& v : row) v = Fp32ToFp16(dist(rng));
    k_rows.push_back(row.data());
  }
  std::vector<float> scores(rows);
  IndexerScoresF16(q.data(), w.data(), heads, k_rows.data(), rows, hd, scores.data());
  for (int j = 0; j < rows; ++j) {
    std::vector<float> kf(hd);
    for (int d = 0; d < hd; ++d) kf[d] = Fp16ToFp32(k[j][d]);
    float want = 0.0f;
    for (int h = 0; h < heads; ++h) {
      const float qk = GgmlOrderDot(std::vector<float>(q.begin() + h * hd, q.begin() + (h + 1) * hd), kf);
      const float term = std::max(qk, 0.0f) * w[h];
      want += term;
    }
    EXPECT_EQ(scores[j], want) << j;
  }
}

TEST(OpsTest, LayerNormCentersScalesAndAppliesWeightAndBias) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(1.0f, 2.0f);
  const int n = 67;  // whole 8-value groups and a remainder
  std::vector<float> x(n), w(n), b(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = dist(rng);
    w[i] = 1.0f + 0.1f * static_cast<float>(i % 5);
    b[i] = 0.01f * static_cast<float>(i);
  }
  LayerNorm(x.data(), w.data(), b.data(), y.data(), n, 1e-5f);
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= n;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= n;
  for (int i = 0; i < n; ++i) {
    const double want = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    EXPECT_NEAR(y[i], want, 1e-5) << i;
  }
  // In place gives the same bits.
  std::vector<float> z = x;
  LayerNorm(z.data(), w.data(), b.data(), z.data(), n, 1e-5f);
  EXPECT_EQ(z, y);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// Softmax's definition written out (GgmlExpf, groups of 8 summed in float in the
// AVX2 reduction's order, the last one padded with zeros, then in double): at every ISA level (ctest runs this binary
// at the scalar level too) Softmax gives exactly these bits.
TEST(OpsTest, SoftmaxGivesItsDefinitionsBitsAtEveryLevel) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 6.0f);
  for (int n : {3, 8, 13, 64, 1001}) {
    std::vector<float> x(n);
    for (float& v : x) v = g(rng);
    x[n / 2] = -INFINITY;  // a masked position
    const float max = *std::max_element(x.begin(), x.end());
    std::vector<float> e(n);
    double sum = 0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; ++l) e[i + l] = exp_internal::GgmlExpf(x[i + l] - max);
      sum += ((e[i] + e[i + 4]) + (e[i + 2] + e[i + 6])) +
             ((e[i + 1] + e[i + 5]) + (e[i + 3] + e[i + 7]));
    }
    if (i < n) {  // the last n % 8 values: a group of 8 with zeros after them
      float g8[8] = {};
      for (int l = 0; i + l < n; ++l) g8[l] = e[i + l] = exp_internal::GgmlExpf(x[i + l] - max);
      sum += ((g8[0] + g8[4]) + (g8[2] + g8[6])) + ((g8[1] + g8[5]) + (g8[3] + g8[7]));
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : e) v *= inv;
    Softmax(x.data(), n);
    EXPECT_EQ(x, e) << "n " << n << " at " << IsaLevelName(KernelIsaLevel());
  }
}

// Softmax at this process's level (ctest runs the scalar level too) against a double
// softmax, over lengths with and without an 8-wide remainder.
__attribute__((target("avx2,fma"))) void VectorGgmlExpf(const float* x, float* out) {
  _mm256_storeu_ps(out, exp_internal::GgmlExpf8(_mm256_loadu_ps(x)));
}

// GgmlExpf8 lane by lane equals GgmlExpf (the scalar level's), and both stay within
// ~3 ulp of e^x over the softmax's range; -inf (a masked position) gives 0.
TEST(OpsTest, GgmlExpfVectorAndScalarAgreeAndApproximateExp) {
  if (CpuIsaLevel() < IsaLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  std::vector<float> xs = {0.0f, -0.0f, -1e-8f, -0.5f, -1.0f, -7.90250301f, -87.0f, -87.5f, -100.0f, -130.0f,
                           -200.0f, -INFINITY, 1.0f, 10.0f};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-110.0f, 0.0f);
  for (int i = 0; i < 4000; ++i) xs.push_back(u(rng));
  while (xs.size() % 8 != 0) xs.push_back(-2.0f);
  for (size_t i = 0; i < xs.size(); i += 8) {
    float out[8];
    VectorGgmlExpf(&xs[i], out);
    for (int l = 0; l < 8; ++l) {
      const float x = xs[i + l];
      const float want = exp_internal::GgmlExpf(x);
      ASSERT_EQ(std::memcmp(&out[l], &want, 4), 0) << "x " << x << ": " << out[l] << " vs " << want;
      if (x == -INFINITY) {
        EXPECT_EQ(want, 0.0f);
      } else if (x > -87.0f) {
        const double exact = std::exp(static_cast<double>(x));
        EXPECT_LE(std::fabs(want - exact), 4e-7 * exact) << "x " << x;  // ~3 ulp
      }
    }
  }
}

TEST(OpsTest, SoftmaxMatchesDoubleReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (int n : {1, 7, 8, 9, 64, 1000, 16387}) {
    std::vector<float> x(n);
    for (float& v : x) v = g(rng);
    std::vector<double> want(n);
    const double mx = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += want[i] = std::exp(x[i] - mx);
    Softmax(x.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(x[i], want[i] / sum, 1e-6 * want[i] / sum + 1e-12) << n << " " << i;
  }
}

}  // namespace
}  // namespace tandem
