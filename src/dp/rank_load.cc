#include "dp/rank_load.h"

#include <cmath>

#include "ops/prometheus_text.h"

namespace tandem::dp {

StatusOr<proxy::RankLoad> ParseRankLoad(std::string_view metrics_text) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<ops::MetricSample> samples,
                          ops::ParsePrometheusText(metrics_text));
  proxy::RankLoad load;
  bool found = false;
  for (const ops::MetricSample& s : samples) {
    if (!std::isfinite(s.value)) continue;
    if (s.name == "vllm:num_requests_waiting") {
      load.waiting += static_cast<int64_t>(std::llround(s.value));
    } else if (s.name == "vllm:num_requests_running") {
      load.running += static_cast<int64_t>(std::llround(s.value));
    } else if (s.name == "vllm:kv_cache_usage_perc") {
      load.kv_usage += s.value;
    } else {
      continue;
    }
    found = true;
  }
  if (!found)
    return InvalidArgumentError("no vllm:num_requests_* or kv_cache_usage gauge in /metrics");
  return load;
}

}  // namespace tandem::dp
