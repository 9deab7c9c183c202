#include "ops/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::ops {
namespace {

TEST(PrometheusText, ParsesSamplesLabelsAndSkipsComments) {
  const char* text =
      "# HELP vllm:prefix_cache_hits Prefix cache hits.\n"
      "# TYPE vllm:prefix_cache_hits counter\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 42\n"
      "\n"
      "plain_gauge 1.5e3\r\n"
      "  spaced { a = \"x\" , b=\"y\" , } 7 1700000000000\n";
  auto samples = ParsePrometheusText(text);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 3u);
  EXPECT_EQ((*samples)[0].name, "vllm:prefix_cache_hits_total");
  EXPECT_EQ((*samples)[0].labels.at("engine"), "0");
  EXPECT_EQ((*samples)[0].labels.at("model_name"), "m");
  EXPECT_EQ((*samples)[0].value, 42);
  EXPECT_EQ((*samples)[1].name, "plain_gauge");
  EXPECT_TRUE((*samples)[1].labels.empty());
  EXPECT_EQ((*samples)[1].value, 1500);
  EXPECT_EQ((*samples)[2].labels.at("a"), "x");
  EXPECT_EQ((*samples)[2].labels.at("b"), "y");
  EXPECT_EQ((*samples)[2].value, 7);
}

TEST(PrometheusText, UnescapesLabelValuesAndReadsSpecialValues) {
  auto samples = ParsePrometheusText(
      "m{path=\"C:\\\\dir\",q=\"say \\\"hi\\\"\",nl=\"a\\nb\",brace=\"}{,\"} +Inf\n"
      "n NaN\n"
      "o -Inf\n");
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  const auto& labels = (*samples)[0].labels;
  EXPECT_EQ(labels.at("path"), "C:\\dir");
  EXPECT_EQ(labels.at("q"), "say \"hi\"");
  EXPECT_EQ(labels.at("nl"), "a\nb");
  EXPECT_EQ(labels.at("brace"), "}{,");
  EXPECT_TRUE(std::isinf((*samples)[0].value) && (*samples)[0].value > 0);
  EXPECT_TRUE(std::isnan((*samples)[1].value));
  EXPECT_TRUE(std::isinf((*samples)[2].value) && (*samples)[2].value < 0);
}

TEST(PrometheusText, RejectsMalformedLinesWithTheirNumber) {
  for (const char* bad : {"ok 1\nno_value\n", "ok 1\nx{a=\"1\" 2\n", "ok 1\nx{a=1} 2\n",
                          "ok 1\nx 1 2 3\n", "ok 1\nx abc\n", "ok 1\n9bad 1\n"}) {
    auto samples = ParsePrometheusText(bad);
    ASSERT_FALSE(samples.ok()) << bad;
    EXPECT_EQ(samples.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(samples.status().message().find("line 2"), std::string::npos)
        << samples.status().message();
  }
}

TEST(PrometheusText, EmptyInputHasNoSamples) {
  auto samples = ParsePrometheusText("");
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(samples->empty());
}

}  // namespace
}  // namespace tandem::ops
