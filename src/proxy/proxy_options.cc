#include "proxy/proxy_options.h"

#include <algorithm>
#include <cmath>

namespace tandem::proxy {

StatusOr<std::vector<BackendAddress>> PairAddresses(const std::string& what,
                                                    const std::vector<std::string>& hosts,
                                                    const std::vector<int>& ports) {
  if (hosts.size() != ports.size()) {
    return InvalidArgumentError("number of " + what + " hosts (" + std::to_string(hosts.size()) +
                                ") must match number of " + what + " ports (" +
                                std::to_string(ports.size()) + ")");
  }
  std::vector<BackendAddress> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].empty()) return InvalidArgumentError("empty " + what + " host");
    if (ports[i] < 1 || ports[i] > 65535) {
      return InvalidArgumentError(what + " port " + std::to_string(ports[i]) +
                                  " is out of range 1-65535");
    }
    std::string host = hosts[i];
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    out.push_back({std::move(host), static_cast<uint16_t>(ports[i])});
  }
  return out;
}

Status ValidateProxyOptions(const ProxyOptions& o) {
  if (o.max_retries < 0) return InvalidArgumentError("--max-retries must be >= 0");
  if (!(o.retry_delay_s >= 0) || o.retry_delay_s > 3600)
    return InvalidArgumentError("--retry-delay must be between 0 and 3600 seconds");
  if (o.max_waiting_retries < 0) return InvalidArgumentError("--max-waiting-retries must be >= 0");
  if (!(o.waiting_retry_interval_s >= 0) || o.waiting_retry_interval_s > 86400)
    return InvalidArgumentError("--waiting-retry-interval must be between 0 and 86400 seconds");
  if (o.health_check_interval.count() <= 0)
    return InvalidArgumentError("the health-check interval must be positive");
  if (o.io_threads < 1) return InvalidArgumentError("at least one I/O thread is needed");
  if (o.max_body_bytes < 1) return InvalidArgumentError("--max-body-bytes must be positive");
  if (o.max_header_bytes < 1024)
    return InvalidArgumentError("--max-header-bytes must be at least 1KiB");
  if (o.max_connections < 1) return InvalidArgumentError("--max-connections must be positive");
  if (WorkerMode(o) && (!o.prefillers.empty() || !o.decoders.empty()))
    return InvalidArgumentError("--worker-urls cannot be combined with prefillers or decoders");
  const size_t routed = RoutedInstances(o).size();
  if (!o.kv_events_endpoints.empty() && o.kv_events_endpoints.size() != routed) {
    return InvalidArgumentError(
        "--kv-events-endpoints has " + std::to_string(o.kv_events_endpoints.size()) +
        " entries; want one per " + (!WorkerMode(o) ? "prefiller" : "worker") + " (" +
        std::to_string(routed) + ")");
  }
  if (!o.kv_events_replay_endpoints.empty() &&
      o.kv_events_replay_endpoints.size() != o.kv_events_endpoints.size()) {
    return InvalidArgumentError(
        "--kv-events-replay-endpoints needs one entry per --kv-events-endpoints entry");
  }
  if (o.routing_policy == RoutingPolicy::kPrefixAware &&
      std::all_of(o.kv_events_endpoints.begin(), o.kv_events_endpoints.end(),
                  [](const std::string& e) { return e.empty(); })) {
    return InvalidArgumentError(
        "--routing-policy prefix_aware needs --kv-events-endpoints (the instances' KV-event "
        "publishers)");
  }
  if (o.prefix_load_threshold < 0)
    return InvalidArgumentError("--prefix-load-threshold must be >= 0");
  if (o.kv_events_silence_timeout.count() <= 0)
    return InvalidArgumentError("--kv-events-timeout must be positive");
  return Status::Ok();
}

StatusOr<BackendAddress> ParseWorkerUrl(std::string_view url) {
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    return InvalidArgumentError("worker URL '" + std::string(url) + "': https is not supported");
  }
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  StatusOr<BackendAddress> address = ParseBackendAddress(rest);
  if (!address.ok()) {
    return InvalidArgumentError("bad worker URL '" + std::string(url) +
                                "' (want http://host:port)");
  }
  return address;
}

bool WorkerMode(const ProxyOptions& options) {
  return options.worker_mode || !options.workers.empty();
}

const std::vector<BackendAddress>& RoutedInstances(const ProxyOptions& options) {
  return WorkerMode(options) ? options.workers : options.prefillers;
}

std::chrono::milliseconds RetryDelay(const ProxyOptions& options, int attempt) {
  const double seconds = options.retry_delay_s * std::pow(2.0, std::max(0, attempt - 1));
  const double ms = std::min(seconds * 1000.0, 60'000.0);  // a minute at most
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(ms)));
}

}  // namespace tandem::proxy
