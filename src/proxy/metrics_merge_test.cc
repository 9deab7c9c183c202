#include "proxy/metrics_merge.h"

#include <gtest/gtest.h>

namespace tandem::proxy {
namespace {

TEST(MetricsMergeTest, AppendsEngineFamiliesOnceWithPerBackendEngineLabels) {
  const std::string own =
      "# HELP tandem_proxy_requests Requests.\n# TYPE tandem_proxy_requests counter\n"
      "tandem_proxy_requests_total{outcome=\"ok\"} 3\n";
  const std::string engine =
      "# HELP vllm:prefix_cache_queries Prefix cache queries.\n"
      "# TYPE vllm:prefix_cache_queries counter\n"
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 100\n"
      "# HELP vllm:kv_cache_usage_perc Usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"
      "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 9\n"
      "tandem_proxy_requests_total{outcome=\"ok\"} 99\n"
      "tandem_kv_transfer_pull_bytes_total 7\n";
  std::string engine2 = engine;
  engine2.replace(engine2.find("} 100"), 5, "} 40");
  const std::string out = MergeBackendMetrics(
      own, {{"prefill@127.0.0.1:8100", engine}, {"decode@127.0.0.1:8200", engine2}, {"decode@h:1", ""}});
  EXPECT_EQ(out.find(own), 0u);
  EXPECT_NE(out.find("vllm:prefix_cache_queries_total{engine=\"prefill@127.0.0.1:8100\",model_name=\"m\"} 100\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vllm:prefix_cache_queries_total{engine=\"decode@127.0.0.1:8200\",model_name=\"m\"} 40\n"),
            std::string::npos);
  EXPECT_NE(out.find("tandem_kv_transfer_pull_bytes_total{engine=\"decode@127.0.0.1:8200\"} 7\n"), std::string::npos);
  // One HELP/TYPE per family; foreign families and the backends' proxy series are left out.
  size_t first = out.find("# TYPE vllm:prefix_cache_queries counter");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(out.find("# TYPE vllm:prefix_cache_queries counter", first + 1), std::string::npos);
  EXPECT_EQ(out.find("process_cpu"), std::string::npos);
  EXPECT_EQ(out.find("} 99"), std::string::npos);
}

TEST(MetricsMergeTest, MalformedLinesAreDroppedNotPropagated) {
  const std::string out = MergeBackendMetrics(
      "", {{"d@x:1", "vllm:a{engine=\"0\" 1\nvllm:b{k=\"v\\\"q\",engine=\"0\"} 2\nvllm:c{k=v} 3\n"}});
  EXPECT_EQ(out, "vllm:b{engine=\"d@x:1\",k=\"v\\\"q\"} 2\n");
}

}  // namespace
}  // namespace tandem::proxy
