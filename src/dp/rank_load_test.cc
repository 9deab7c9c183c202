#include "dp/rank_load.h"

#include <gtest/gtest.h>

namespace tandem::dp {
namespace {

TEST(RankLoad, ReadsTheEngineGauges) {
  const std::string text =
      "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 5\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 100\n";
  auto load = ParseRankLoad(text);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->running, 3);
  EXPECT_EQ(load->waiting, 5);
  EXPECT_DOUBLE_EQ(load->kv_usage, 0.25);
  EXPECT_EQ(proxy::RankScore(*load, 0), 5 * 4 + 3);
  EXPECT_EQ(proxy::RankScore(*load, 2), 7 * 4 + 3);  // sent since the report count as waiting
}

TEST(RankLoad, RefusesTextWithoutTheGauges) {
  EXPECT_FALSE(ParseRankLoad("tandem_proxy_requests_in_flight 1\n").ok());
  EXPECT_FALSE(ParseRankLoad("not prometheus {{\n").ok());
}

TEST(RankLoad, RoutesToTheLowestScoreThenKvUsage) {
  std::vector<proxy::RouteCandidate> c(3);
  c[0].rank_score = 9;
  c[1].rank_score = 4;
  c[1].kv_usage = 0.5;
  c[2].rank_score = 4;
  c[2].kv_usage = 0.1;
  EXPECT_EQ(proxy::ChooseRankLoad(c), 2u);
  c[2].kv_usage = 0.5;
  c[1].in_flight = 2;
  EXPECT_EQ(proxy::ChooseRankLoad(c), 2u);  // then fewer in flight
  c[1].in_flight = 0;
  c[2].in_flight = 0;
  c[1].last_pick = 7;
  c[2].last_pick = 3;
  EXPECT_EQ(proxy::ChooseRankLoad(c), 2u);  // then the least recently picked
}

}  // namespace
}  // namespace tandem::dp
