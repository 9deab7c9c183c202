// ProxyMetrics: the proxy's tandem_proxy_* series in a MetricsRegistry.
//
//   tandem_proxy_requests_total{outcome}      finished client requests: success,
//                                             client_error (4xx), failed (the proxy or
//                                             the backends failed), cancelled (client left)
//   tandem_proxy_requests_in_flight           client requests being served
//   tandem_proxy_retries_total{role}          backend calls retried
//   tandem_proxy_recomputes_total             requests re-routed after "recomputed"
//   tandem_proxy_kv_aborts_total              explicit /kv_transfer/abort calls to prefillers
// (per-backend gauges are the BackendRegistry's.)
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>

#include "common/metrics.h"
#include "proxy/backend_registry.h"

namespace tandem::proxy {

enum class Outcome { kSuccess = 0, kClientError, kFailed, kCancelled };

class ProxyMetrics {
 public:
  // `registry` must outlive this object.
  explicit ProxyMetrics(MetricsRegistry* registry);

  void RequestStarted() { in_flight_->Add(1); }
  void RequestFinished(Outcome outcome);
  void Retried(Role role) { retries_[static_cast<int>(role)]->Add(1); }
  void Recomputed() { recomputes_->Add(1); }
  void KvAborted() { kv_aborts_->Add(1); }
  int64_t in_flight() const { return static_cast<int64_t>(in_flight_->value()); }

 private:
  Counter* requests_[4];
  Gauge* in_flight_;
  Counter* retries_[2];
  Counter* recomputes_;
  Counter* kv_aborts_;
};

}  // namespace tandem::proxy
