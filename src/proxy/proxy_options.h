// ProxyOptions: the configuration of `tandem proxy` (the flags of vllm-ascend's
// load_balance_proxy_server_example.py, plus --api-key), and its validation.
//
// Thread safety: a value type.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proxy/backend_registry.h"
#include "proxy/routing_policy.h"

namespace tandem::proxy {

struct ProxyOptions {
  std::string host = "127.0.0.1";  // bind address (loopback unless told otherwise)
  uint16_t port = 8000;
  std::vector<BackendAddress> prefillers;
  std::vector<BackendAddress> decoders;
  // Instances that do both phases (vllm-router's --worker-urls). When set, the proxy
  // runs without PD: each request goes unchanged to one worker; prefillers and
  // decoders must be empty.
  std::vector<BackendAddress> workers;
  // Worker mode even while `workers` is empty: the instances join at run time (the
  // data-parallel front end, src/dp, adds its ranks through ProxyServer::AddWorker);
  // /health then answers 503 while no worker is up.
  bool worker_mode = false;
  // How the routed phase (prefill, or the worker) picks its instance.
  RoutingPolicy routing_policy = RoutingPolicy::kLeastLoad;
  // KV-event publisher per routed instance, aligned with `prefillers` (PD) or `workers`
  // ("" = that instance publishes none); empty = none at all. prefix_aware needs them.
  std::vector<std::string> kv_events_endpoints;
  // Their replay (ROUTER) endpoints, aligned the same way ("" = none); empty = none.
  // Missed batches are asked for there before an instance's entries are dropped.
  std::vector<std::string> kv_events_replay_endpoints;
  std::string kv_events_topic;  // subscription prefix ("" = every topic)
  // prefix_aware: requests in flight the prefix holder may have beyond the least busy
  // instance before the request goes by load instead.
  int64_t prefix_load_threshold = 4;
  // An instance sent work that stores blocks and silent this long is dropped from the
  // prefix index.
  std::chrono::milliseconds kv_events_silence_timeout{30'000};
  // Attempts per phase (prefill, decode) before the request fails; at least one is made
  // (the Python proxy's meaning of --max-retries).
  int max_retries = 3;
  // false: a decode/worker request that was written to a backend is not replayed on
  // another when that backend fails (it may have run it); only connect failures and
  // overload answers are retried (the data-parallel front end: a rank that dies fails
  // the requests it had).
  bool retry_sent_requests = true;
  // Back-off before attempt k+1: retry_delay_s * 2^(k-1) seconds.
  double retry_delay_s = 0.001;
  // Instances added at run time: probes before giving up, and the time between them.
  int max_waiting_retries = 3;
  double waiting_retry_interval_s = 10;
  // Down instances are probed (GET /health) this often.
  std::chrono::milliseconds health_check_interval{1000};
  std::chrono::milliseconds probe_timeout{2000};
  // Longest silence of a backend while the proxy waits for or reads its answer.
  std::chrono::milliseconds backend_idle_timeout{600'000};
  // Clients must send "Authorization: Bearer <api_key>" when set (on every route unless
  // no_auth_health_metrics opens /health, /healthcheck and /metrics); backends get it too.
  std::string api_key;
  bool no_auth_health_metrics = false;
  // Sent to backends as Bearer when api_key is empty (the Python proxy's
  // $OPENAI_API_KEY); when both are empty the client's Authorization is forwarded.
  std::string backend_api_key;
  int io_threads = 2;  // server and client I/O threads each
  size_t max_body_bytes = 64u << 20;    // larger request bodies get 413
  size_t max_header_bytes = 64u << 10;  // request line + headers; larger get 431
  size_t max_connections = 10000;       // open client connections; more get 503
};

// Pairs `hosts[i]` with `ports[i]`. InvalidArgument naming `what` ("prefiller",
// "decoder") when the counts differ, a host is empty or a port is out of range.
StatusOr<std::vector<BackendAddress>> PairAddresses(const std::string& what,
                                                    const std::vector<std::string>& hosts,
                                                    const std::vector<int>& ports);

// Parses --worker-urls items: "http://host:port" (a trailing "/" allowed) or
// "host:port". InvalidArgument for anything else (https is not supported).
StatusOr<BackendAddress> ParseWorkerUrl(std::string_view url);

// True when requests go unchanged to one worker (workers given, or worker_mode).
bool WorkerMode(const ProxyOptions& options);

// The instances the routing policy applies to: workers, else prefillers.
const std::vector<BackendAddress>& RoutedInstances(const ProxyOptions& options);

// InvalidArgument for out-of-range numbers and inconsistent routing settings.
Status ValidateProxyOptions(const ProxyOptions& options);

// The delay before retry number `attempt` (1 = the first retry).
std::chrono::milliseconds RetryDelay(const ProxyOptions& options, int attempt);

}  // namespace tandem::proxy
