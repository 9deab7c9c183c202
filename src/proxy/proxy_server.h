// ProxyServer: `tandem proxy`, the single OpenAI entry point of a PD-disaggregated
// cluster (docs/ARCHITECTURE.md, "The proxy").
//
// Routes:
//   POST /v1/completions, /v1/chat/completions  through a prefiller and a decoder
//                                               (PdRequest), streamed or not; with
//                                               workers (--worker-urls), unchanged to one
//                                               worker
//   GET  /v1/models                             from a decoder (else a prefiller)
//   GET  /health, /healthcheck                  {"status":"ok","prefill_instances":N,
//                                               "decode_instances":N,"request_num":N};
//                                               with ProxyOptions::worker_mode, 503 while
//                                               no worker is up
//   GET  /metrics                               Prometheus text, tandem_proxy_*
//   POST /instances/add, /instances/remove      {"type":"prefill"|"decode"|"worker",
//                                               "instances":["host:port",...]|"host:port"}
// With ProxyOptions::api_key set every route requires "Authorization: Bearer <key>"
// (401 otherwise), except /health, /healthcheck and /metrics when
// no_auth_health_metrics is set. The key goes to the backends with every request,
// health probe and /metrics scrape.
//
// Everything is asynchronous (net::HttpServer and net::HttpClient on Asio coroutines):
// no thread per connection or per request.
//
// Thread safety: Start(), Stop() and the destructor from one controlling thread;
// port() after Start().
#pragma once

#include <memory>

#include "common/metrics.h"
#include "common/status.h"
#include "proxy/backend_registry.h"
#include "proxy/proxy_options.h"

namespace tandem::net {
class HttpResponseWriter;
class HttpServer;
}  // namespace tandem::net

namespace tandem::proxy {

class BackendIo;
class HealthProber;
class PrefixRouter;
class ProxyMetrics;
struct ProxyContext;

class ProxyServer {
 public:
  // InvalidArgument for bad options.
  static StatusOr<std::unique_ptr<ProxyServer>> Create(ProxyOptions options);
  ~ProxyServer();  // Stop()s

  // Binds and serves; Unavailable when the address is in use.
  Status Start();
  // Stops accepting, lets responses in flight end (bounded grace), then closes the
  // backend I/O. Idempotent.
  void Stop();
  uint16_t port() const;

  // For an embedding front end (the data-parallel one, src/dp) in worker mode:
  // registers a worker as kPending (the prober brings it up once /health answers 200;
  // pending probes give up after max_waiting_retries) with `label` as its engine label;
  // false when it is already registered.
  bool AddWorker(const BackendAddress& address, const std::string& label);
  // Marks a registered worker down at once (its process died); the prober brings it
  // back when /health answers 200 again. No effect on unknown addresses.
  void MarkWorkerDown(const BackendAddress& address);
  // Removes (or drains) a worker; false when it is not registered.
  bool RemoveWorker(const BackendAddress& address);
  // The worker's own report of its load (RoutingPolicy::kRankLoad).
  void ReportWorkerLoad(const BackendAddress& address, const RankLoad& load);

  // For tests: the registry (instance states and loads).
  const BackendRegistry& registry() const { return *registry_; }

 private:
  explicit ProxyServer(ProxyOptions options);
  void AddRoutes();
  void AddInstances(Role role, std::vector<BackendAddress> addresses,
                    std::shared_ptr<net::HttpResponseWriter> writer);
  void RemoveInstances(Role role, const std::vector<BackendAddress>& addresses,
                       net::HttpResponseWriter& writer);

  ProxyOptions options_;
  std::string backend_authorization_;  // "Bearer <key>" or "" (forward the client's)
  // Declaration order = reverse destruction order: the I/O (whose callbacks use the
  // registry, prober and context) goes first.
  MetricsRegistry metrics_registry_;
  std::unique_ptr<ProxyMetrics> metrics_;
  std::unique_ptr<BackendRegistry> registry_;
  std::unique_ptr<ProxyContext> context_;
  std::unique_ptr<HealthProber> prober_;
  std::unique_ptr<PrefixRouter> router_;  // with --kv-events-endpoints
  std::unique_ptr<BackendIo> io_;
  std::unique_ptr<net::HttpServer> http_;
  bool stopped_ = false;
};

}  // namespace tandem::proxy
