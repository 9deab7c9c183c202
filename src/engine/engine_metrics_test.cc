#include "engine/engine_metrics.h"

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "engine/spec_decode_metrics.h"

namespace tandem {
namespace {

// The `engine` label is the engine index (the data-parallel rank), as in vLLM.
TEST(EngineMetricsTest, EngineLabelIsTheEngineIndex) {
  MetricsRegistry registry;
  EngineMetrics metrics(&registry, "m", 3);
  metrics.OnPreemptions(2);
  SpecDecodeMetrics spec(&registry, "m", 1, 3);
  spec.OnDraft(1, 1);
  const std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find("vllm:num_preemptions_total{engine=\"3\",model_name=\"m\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:spec_decode_num_drafts_total{engine=\"3\",model_name=\"m\"} 1"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("engine=\"0\""), std::string::npos) << text;
}

}  // namespace
}  // namespace tandem
