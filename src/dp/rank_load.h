// The load a rank reports on its /metrics (vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc; summed over their label sets),
// for RoutingPolicy::kRankLoad.
//
// Thread safety: pure function.
#pragma once

#include <string_view>

#include "common/status.h"
#include "proxy/routing_policy.h"

namespace tandem::dp {

// InvalidArgument when the text does not parse or has none of the three gauges.
StatusOr<proxy::RankLoad> ParseRankLoad(std::string_view metrics_text);

}  // namespace tandem::dp
