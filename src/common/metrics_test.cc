#include "common/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace tandem {
namespace {

TEST(MetricsTest, RendersPrometheusText) {
  MetricsRegistry r;
  Counter* c = r.GetCounter("vllm:prompt_tokens", "Prompt tokens.", {{"model_name", "m"}});
  c->Add(3);
  c->Add(2);
  EXPECT_EQ(r.GetCounter("vllm:prompt_tokens", "", {{"model_name", "m"}}), c);
  r.GetGauge("vllm:num_requests_running", "Running.", {{"model_name", "m"}})->Set(2);
  Histogram* h = r.GetHistogram("vllm:e2e_request_latency_seconds", "Latency.", {0.1, 1.0}, {{"model_name", "m"}});
  h->Observe(0.05);
  h->Observe(0.5);
  h->Observe(5);
  const std::string text = r.RenderPrometheus();
  EXPECT_NE(text.find("# TYPE vllm:prompt_tokens counter"), std::string::npos);
  EXPECT_NE(text.find("vllm:prompt_tokens_total{model_name=\"m\"} 5.0"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:num_requests_running{model_name=\"m\"} 2.0"), std::string::npos);
  EXPECT_NE(text.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.10000000000000001\"} 1"),
            std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 3"), std::string::npos);
  EXPECT_NE(text.find("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 3"), std::string::npos);
}

TEST(MetricsTest, ConcurrentUpdatesAreCounted) {
  MetricsRegistry r;
  Counter* c = r.GetCounter("x", "x");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([c] { for (int i = 0; i < 10000; ++i) c->Add(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapePrometheusLabelValue("plain"), "plain");
  EXPECT_EQ(EscapePrometheusLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsRegistry r;
  r.GetGauge("g", "g", {{"path", "C:\\\"x\""}})->Set(1);
  EXPECT_NE(r.RenderPrometheus().find("g{path=\"C:\\\\\\\"x\\\"\"} 1.0"), std::string::npos) << r.RenderPrometheus();
}

}  // namespace
}  // namespace tandem
