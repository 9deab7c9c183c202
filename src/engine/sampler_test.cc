#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "engine/generator.h"
#include "kernels/sampling_ops.h"

namespace tandem {
namespace {

TEST(SamplerTest, GreedyPicksArgmax) {
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 2.9f};
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.Sample(logits.data(), 4), 1);
}

TEST(SamplerTest, SeedReproducesAndTopKRestricts) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 42;
  std::vector<float> base = {1.0f, 1.1f, 0.9f, 1.05f, -5.0f};
  Sampler a(p), b(p);
  std::map<int, int> counts;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> la = base, lb = base;
    int ta = a.Sample(la.data(), 5);
    EXPECT_EQ(ta, b.Sample(lb.data(), 5));
    counts[ta]++;
  }
  // top_k = 2 keeps ids 1 and 3 only, and both are drawn.
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
}

// Without top-k / top-p the sampler draws over the whole vocabulary in place: the same
// tokens as the candidate-list definition (index order, p = e^((l - max) / T) by
// ExpNonPositive, total in SamplingWeights' order, p below
// min_p or non-finite logits left out, u ~ U(0, total) from the request's RNG).
TEST(SamplerTest, FullVocabularyDrawMatchesDefinition) {
  for (float min_p : {0.0f, 0.05f}) {
    SamplingParams p;
    p.temperature = 0.8f;
    p.min_p = min_p;
    p.seed = 7;
    Sampler sampler(p);
    std::mt19937_64 rng(p.seed);
    std::mt19937 gen(3);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    std::map<int, int> counts;
    for (int draw = 0; draw < 300; ++draw) {
      std::vector<float> l(1000);
      for (float& v : l) v = logit(gen);
      l[17] = -INFINITY;
      l[500] = 9.0f;
      const float max = *std::max_element(l.begin(), l.end());
      std::vector<std::pair<double, int>> cand;
      double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the total as SamplingWeights adds it
      for (int i = 0; i < 1000; ++i) {
        if (!std::isfinite(l[i])) continue;
        const float q = ExpNonPositive((l[i] - max) * (1.0f / p.temperature));
        if (q >= min_p && q > 0.0f) {
          cand.emplace_back(q, i);
          partial[i % 8] += q;
        }
      }
      double total = 0;
      for (double part : partial) total += part;
      std::uniform_real_distribution<double> u(0.0, total);
      double r = u(rng);
      int want = cand.back().second;
      for (const auto& [q, i] : cand) {
        r -= q;
        if (r <= 0) {
          want = i;
          break;
        }
      }
      const int got = sampler.Sample(l.data(), 1000);
      ASSERT_EQ(got, want) << "draw " << draw << " min_p " << min_p;
      ASSERT_NE(got, 17);
      counts[got]++;
    }
    EXPECT_GT(counts[500], 50);  // the dominant logit is drawn often, but not always
    EXPECT_GT(counts.size(), 2u);
  }
}

// A temperature too small for 1 / T to be a float is greedy (as in vLLM, below 1e-5),
// with or without top-k / top-p, and never an invalid token.
TEST(SamplerTest, TinyTemperatureIsGreedy) {
  const std::vector<float> base = {0.5f, 2.0f, 1.9f, -1.0f};
  for (float t : {1e-40f, 1e-20f, 9e-6f}) {
    for (int top_k : {0, 2}) {
      SamplingParams p;
      p.temperature = t;
      p.top_k = top_k;
      Sampler s(p);
      std::vector<float> l = base;
      EXPECT_EQ(s.Sample(l.data(), 4), 1) << t << " top_k " << top_k;
    }
  }
}

TEST(SamplerTest, TopPKeepsNucleus) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  std::vector<float> base = {10.0f, 0.0f, 0.0f, 0.0f};
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l = base;
    EXPECT_EQ(s.Sample(l.data(), 4), 0);
  }
}

TEST(Utf8StreamTest, HoldsBackIncompleteSequences) {
  Utf8Stream u;
  const std::string euro = "\xE2\x82\xAC";  // €
  EXPECT_EQ(u.Push("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(u.Push(euro.substr(1, 1)), "");
  EXPECT_EQ(u.Push(euro.substr(2, 1) + "b"), euro + "b");
  EXPECT_EQ(u.Push("\xF0\x9F"), "");
  EXPECT_EQ(u.Flush(), "\xEF\xBF\xBD");
}

TEST(Utf8StreamTest, ReplacesInvalidBytes) {
  Utf8Stream u;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(u.Push("a\xFF"
                   "b"),
            "a" + fffd + "b");
  EXPECT_EQ(u.Push("\xE1"
                   "c"),
            fffd + "c");                                  // lead byte without continuation
  EXPECT_EQ(u.Push("\xC0\xAF"), fffd + fffd);             // overlong encoding
  EXPECT_EQ(u.Push("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(u.Push("\x80"), fffd);                        // stray continuation
  EXPECT_EQ(u.Flush(), "");
}

}  // namespace
}  // namespace tandem
