// ProxyMetrics: the proxy's tandem_proxy_* series in a MetricsRegistry.
//
//   tandem_proxy_requests_total{outcome}      finished client requests: success,
//                                             client_error (4xx), failed (the proxy or
//                                             the backends failed), cancelled (client left)
//   tandem_proxy_requests_in_flight           client requests being served
//   tandem_proxy_retries_total{role}          backend calls retried
//   tandem_proxy_recomputes_total             requests re-routed after "recomputed"
//   tandem_proxy_kv_aborts_total              explicit /kv_transfer/abort calls to prefillers
//   tandem_proxy_routing_decisions_total{policy,reason}
//                                             picks of the routed phase (prefill, or the
//                                             worker) by RouteReason (routing_policy.h)
//   tandem_proxy_prefix_predicted_cached_tokens_total / _reported_cached_tokens_total /
//   _prompt_tokens_total                      prefix_aware requests whose engine reported
//                                             usage.prompt_tokens_details.cached_tokens:
//                                             the index's prediction for the chosen
//                                             instance, the engine's figure, and their
//                                             prompt tokens (hit rates = ratios)
// (per-backend gauges are the BackendRegistry's.)
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>

#include "common/metrics.h"
#include "proxy/backend_registry.h"
#include "proxy/routing_policy.h"

namespace tandem::proxy {

enum class Outcome { kSuccess = 0, kClientError, kFailed, kCancelled };

class ProxyMetrics {
 public:
  // `registry` must outlive this object.
  // `policy` labels the routing decisions.
  explicit ProxyMetrics(MetricsRegistry* registry,
                        RoutingPolicy policy = RoutingPolicy::kLeastLoad);

  void RequestStarted() { in_flight_->Add(1); }
  void RequestFinished(Outcome outcome);
  void Retried(Role role) { retries_[static_cast<int>(role)]->Add(1); }
  void Recomputed() { recomputes_->Add(1); }
  void KvAborted() { kv_aborts_->Add(1); }
  void RouteDecided(RouteReason reason) { routing_[static_cast<int>(reason)]->Add(1); }
  // A prefix_aware request's prediction vs the engine's report (tokens).
  void PrefixOutcome(int64_t predicted_cached, int64_t reported_cached, int64_t prompt_tokens);
  int64_t in_flight() const { return static_cast<int64_t>(in_flight_->value()); }

 private:
  Counter* requests_[4];
  Gauge* in_flight_;
  Counter* retries_[kNumRoles];
  Counter* routing_[kNumRouteReasons];
  Counter* predicted_cached_;
  Counter* reported_cached_;
  Counter* scored_prompt_tokens_;
  Counter* recomputes_;
  Counter* kv_aborts_;
};

}  // namespace tandem::proxy
