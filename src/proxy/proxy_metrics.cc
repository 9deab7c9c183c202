#include "proxy/proxy_metrics.h"

namespace tandem::proxy {

ProxyMetrics::ProxyMetrics(MetricsRegistry* registry, RoutingPolicy policy) {
  const char* outcomes[] = {"success", "client_error", "failed", "cancelled"};
  for (int i = 0; i < 4; ++i) {
    requests_[i] =
        registry->GetCounter("tandem_proxy_requests", "Client requests finished, by outcome",
                             {{"outcome", outcomes[i]}});
  }
  in_flight_ =
      registry->GetGauge("tandem_proxy_requests_in_flight", "Client requests being served");
  for (Role role : {Role::kPrefill, Role::kDecode, Role::kWorker}) {
    retries_[static_cast<int>(role)] = registry->GetCounter(
        "tandem_proxy_retries", "Backend calls retried", {{"role", std::string(RoleName(role))}});
  }
  recomputes_ = registry->GetCounter("tandem_proxy_recomputes",
                                     "Requests re-routed after stop_reason 'recomputed'");
  kv_aborts_ =
      registry->GetCounter("tandem_proxy_kv_aborts", "Explicit KV aborts sent to prefillers");
  for (int i = 0; i < kNumRouteReasons; ++i) {
    routing_[i] = registry->GetCounter(
        "tandem_proxy_routing_decisions", "Routed-phase instance picks, by policy and reason",
        {{"policy", std::string(RoutingPolicyName(policy))},
         {"reason", std::string(RouteReasonName(static_cast<RouteReason>(i)))}});
  }
  predicted_cached_ = registry->GetCounter(
      "tandem_proxy_prefix_predicted_cached_tokens",
      "prefix_aware: cached prompt tokens the index predicted on the chosen instance");
  reported_cached_ = registry->GetCounter(
      "tandem_proxy_prefix_reported_cached_tokens",
      "prefix_aware: cached_tokens the chosen instance reported for the same requests");
  scored_prompt_tokens_ = registry->GetCounter("tandem_proxy_prefix_prompt_tokens",
                                               "prefix_aware: prompt tokens of those requests");
}

void ProxyMetrics::PrefixOutcome(int64_t predicted_cached, int64_t reported_cached,
                                 int64_t prompt_tokens) {
  predicted_cached_->Add(static_cast<double>(predicted_cached));
  reported_cached_->Add(static_cast<double>(reported_cached));
  scored_prompt_tokens_->Add(static_cast<double>(prompt_tokens));
}

void ProxyMetrics::RequestFinished(Outcome outcome) {
  requests_[static_cast<int>(outcome)]->Add(1);
  in_flight_->Add(-1);
}

}  // namespace tandem::proxy
