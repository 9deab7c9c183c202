#include "proxy/proxy_metrics.h"

namespace tandem::proxy {

ProxyMetrics::ProxyMetrics(MetricsRegistry* registry) {
  const char* outcomes[] = {"success", "client_error", "failed", "cancelled"};
  for (int i = 0; i < 4; ++i) {
    requests_[i] =
        registry->GetCounter("tandem_proxy_requests", "Client requests finished, by outcome",
                             {{"outcome", outcomes[i]}});
  }
  in_flight_ =
      registry->GetGauge("tandem_proxy_requests_in_flight", "Client requests being served");
  for (Role role : {Role::kPrefill, Role::kDecode}) {
    retries_[static_cast<int>(role)] = registry->GetCounter(
        "tandem_proxy_retries", "Backend calls retried", {{"role", std::string(RoleName(role))}});
  }
  recomputes_ = registry->GetCounter("tandem_proxy_recomputes",
                                     "Requests re-routed after stop_reason 'recomputed'");
  kv_aborts_ =
      registry->GetCounter("tandem_proxy_kv_aborts", "Explicit KV aborts sent to prefillers");
}

void ProxyMetrics::RequestFinished(Outcome outcome) {
  requests_[static_cast<int>(outcome)]->Add(1);
  in_flight_->Add(-1);
}

}  // namespace tandem::proxy
