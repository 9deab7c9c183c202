#include "ops/bench_stats.h"

#include <gtest/gtest.h>

namespace tandem::ops {
namespace {

RequestResult Done(double ttft_s, double latency_s, int out_tokens, int in_tokens = 10) {
  RequestResult r;
  r.success = true;
  r.ttft_s = ttft_s;
  r.latency_s = latency_s;
  r.output_tokens = out_tokens;
  r.prompt_tokens = in_tokens;
  return r;
}

TEST(BenchStats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);  // numpy.percentile([1,2,3,4], 99)
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(BenchStats, SummarizeInMilliseconds) {
  LatencySummary s = Summarize({0.3, 0.1, 0.2});
  EXPECT_NEAR(s.mean_ms, 200, 1e-9);
  EXPECT_NEAR(s.median_ms, 200, 1e-9);
  EXPECT_NEAR(s.std_ms, 81.6496580927726, 1e-9);  // population std
  EXPECT_NEAR(s.p90_ms, 280, 1e-9);               // numpy.percentile([0.1, 0.2, 0.3], 90) * 1000
  EXPECT_NEAR(s.p99_ms, 298, 1e-9);
  LatencySummary empty = Summarize({});
  EXPECT_EQ(empty.mean_ms, 0);
  EXPECT_EQ(empty.p99_ms, 0);
}

TEST(BenchStats, ParsesGoodputSlos) {
  auto slos = ParseGoodputSlos({"ttft:500", "tpot:50.5", "e2el:2000"});
  ASSERT_TRUE(slos.ok());
  EXPECT_EQ(*slos->ttft_ms, 500);
  EXPECT_EQ(*slos->tpot_ms, 50.5);
  EXPECT_EQ(*slos->e2el_ms, 2000);
  EXPECT_FALSE(ParseGoodputSlos({}).value().any());
  for (const char* bad : {"ttft", "ttft:", "ttft:x", "ttft:-1", "itl:5"}) {
    auto r = ParseGoodputSlos({bad});
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(BenchStats, MetricsFollowVllmDefinitions) {
  std::vector<RequestResult> results;
  results.push_back(Done(0.1, 1.1, 11));  // TPOT (1.1 - 0.1) / 10 = 0.1
  results.back().itl_s = {0.1, 0.1};
  results.push_back(Done(0.3, 0.3, 1));  // one token: no TPOT sample
  results.back().itl_s = {};
  RequestResult failed;
  failed.error = "HTTP 500";
  results.push_back(failed);
  BenchMetrics m = ComputeBenchMetrics(results, 2.0, {});
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 20);
  EXPECT_EQ(m.total_output_tokens, 12);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 6.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 16.0);
  EXPECT_FALSE(m.request_goodput);
  EXPECT_NEAR(m.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(m.tpot.mean_ms, 100, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 700, 1e-9);
}

TEST(BenchStats, PrefixHitRateIsCachedOverPromptTokens) {
  std::vector<RequestResult> results = {Done(0.1, 0.2, 2, 100), Done(0.1, 0.2, 2, 300)};
  results[0].cached_tokens = 0;    // the first turn: cold
  results[1].cached_tokens = 240;  // a follow-up on the instance holding its history
  RequestResult failed;            // failed requests count for nothing
  failed.prompt_tokens = 50;
  failed.cached_tokens = 50;
  results.push_back(failed);
  BenchMetrics m = ComputeBenchMetrics(results, 1.0, {});
  EXPECT_EQ(m.total_cached_tokens, 240);
  ASSERT_TRUE(m.prefix_hit_rate);
  EXPECT_DOUBLE_EQ(*m.prefix_hit_rate, 0.6);
  EXPECT_FALSE(ComputeBenchMetrics({}, 1.0, {}).prefix_hit_rate);
}

TEST(BenchStats, GoodputCountsRequestsMeetingEverySlo) {
  std::vector<RequestResult> results = {
      Done(0.1, 1.1, 11),  // TTFT 100 ms, TPOT 100 ms, E2EL 1100 ms
      Done(0.6, 0.6, 1),   // TTFT 600 ms, TPOT 0 (one token)
      Done(0.2, 5.2, 11),  // TPOT 500 ms
  };
  auto goodput = [&](std::vector<std::string> items) {
    return *ComputeBenchMetrics(results, 2.0, ParseGoodputSlos(items).value()).request_goodput;
  };
  EXPECT_DOUBLE_EQ(goodput({"ttft:500"}), 1.0);  // 1st and 3rd
  EXPECT_DOUBLE_EQ(goodput({"tpot:100"}), 1.0);  // 1st and 2nd (0 counts)
  EXPECT_DOUBLE_EQ(goodput({"ttft:500", "tpot:100"}), 0.5);
  EXPECT_DOUBLE_EQ(goodput({"e2el:1000"}), 0.5);  // only the 2nd
  EXPECT_DOUBLE_EQ(goodput({"e2el:10000"}), 1.5);
}

}  // namespace
}  // namespace tandem::ops
