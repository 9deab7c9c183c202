#include "kernels/sampling_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tandem {
namespace {

// Within 2 ulp of e^x (double reference) over [-87, 0]; 0 below and for NaN / -inf.
TEST(SamplingOpsTest, ExpNonPositiveWithinTwoUlp) {
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositive(-0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositive(-87.5f), 0.0f);
  EXPECT_EQ(ExpNonPositive(-INFINITY), 0.0f);
  EXPECT_EQ(ExpNonPositive(NAN), 0.0f);
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    const float got = ExpNonPositive(x);
    const double ulp =
        std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    worst = std::max(worst, std::fabs(got - want) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_GT(ExpNonPositive(-87.0f), 0.0f);
}

TEST(SamplingOpsTest, MaxFiniteSkipsInfAndNan) {
  std::vector<float> x(37, -3.0f);
  x[5] = INFINITY;
  x[6] = NAN;
  x[20] = 2.5f;
  x[36] = 2.75f;  // in the scalar tail of the vector path
  EXPECT_EQ(MaxFinite(x.data(), 37), 2.75f);
  EXPECT_EQ(MaxFinite(x.data(), 36), 2.5f);
  std::vector<float> none = {-INFINITY, NAN, INFINITY};
  EXPECT_EQ(MaxFinite(none.data(), 3), -INFINITY);
}

// ArgmaxIndex (the vector path at avx2 and above, the scalar one at TANDEM_ISA=scalar) picks
// what the scalar rule picks: ties to the first, NaN never (but at 0), infinities.
TEST(SamplingOpsTest, ArgmaxIndexIsTheScalarRule) {
  auto rule = [](const std::vector<float>& x) {
    int64_t best = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(x.size()); ++i) {
      if (x[i] > x[best]) best = i;
    }
    return best;
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> coarse(-4, 4);  // few distinct values: many ties
  for (int n : {1, 2, 7, 31, 32, 33, 64, 95, 100, 1000, 262144}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(coarse(rng));
      if (trial % 4 == 1) x[rng() % n] = NAN;
      if (trial % 4 == 2) x[rng() % n] = INFINITY;
      if (trial % 4 == 3) x[0] = NAN;
      if (trial % 5 == 4) x[n - 1] = 9.0f;  // the winner in the scalar tail
      ASSERT_EQ(ArgmaxIndex(x.data(), n), rule(x)) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> nan_first = {NAN, 1.0f, 2.0f, INFINITY};
  EXPECT_EQ(ArgmaxIndex(nan_first.data(), 4), 0);
  std::vector<float> ramp(100);
  for (int i = 0; i < 100; ++i) ramp[i] = static_cast<float>(i % 50);  // 49 at 49 and 99
  EXPECT_EQ(ArgmaxIndex(ramp.data(), 100), 49);
}

// SamplingWeights (the vector path here) gives its definition's bits: each weight, the
// total from 8 partial sums and the last non-zero index.
TEST(SamplingOpsTest, SamplingWeightsMatchDefinition) {
  std::mt19937 gen(11);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  for (float floor : {0.0f, 0.05f}) {
    for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{1003}, int64_t{4096}}) {
      std::vector<float> x(n);
      for (float& v : x) v = logit(gen);
      if (n > 10) {
        x[3] = -INFINITY;
        x[4] = NAN;
        x[9] = INFINITY;
        x[n - 1] = -200.0f;  // weight 0: not the last non-zero one
      }
      const float max = MaxFinite(x.data(), n), inv_t = 1.0f / 0.7f;
      std::vector<float> want(n);
      double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t want_last = -1;
      for (int64_t i = 0; i < n; ++i) {
        float w = 0.0f;
        if (std::isfinite(x[i])) w = ExpNonPositive((x[i] - max) * inv_t);
        if (!(w >= floor && w > 0.0f)) w = 0.0f;
        want[i] = w;
        partial[i % 8] += w;
        if (w > 0.0f) want_last = i;
      }
      double want_total = 0;
      for (double p : partial) want_total += p;
      int64_t last = -2;
      const double total = SamplingWeights(x.data(), n, max, inv_t, floor, &last);
      ASSERT_EQ(x, want) << "n " << n << " floor " << floor;
      EXPECT_EQ(total, want_total);
      EXPECT_EQ(last, want_last);
      EXPECT_GT(total, 0.0);
    }
  }
}

}  // namespace
}  // namespace tandem
