#include "ops/metrics_scrape.h"

#include "net/url.h"

namespace tandem::ops {

StatusOr<MetricsEndpoint> ParseMetricsEndpoint(const std::string& text) {
  StatusOr<net::HttpUrl> url = net::ParseHttpUrl(text);
  if (!url.ok()) return url.status();
  if (url->target == "/") url->target = "/metrics";
  return MetricsEndpoint{"http://" + url->HostPort() + url->target, url->HostPort(), ""};
}

StatusOr<std::string> FetchMetricsText(net::HttpClient& client, const MetricsEndpoint& endpoint,
                                       std::chrono::milliseconds timeout) {
  net::HttpHeaders headers;
  if (!endpoint.api_key.empty()) headers.Set("Authorization", "Bearer " + endpoint.api_key);
  StatusOr<net::HttpResponse> response = client.Fetch("GET", endpoint.url, headers, {}, timeout);
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return UnavailableError(endpoint.url + " answered HTTP " + std::to_string(response->status));
  }
  return std::move(response->body);
}

StatusOr<PrefixCacheCounters> ScrapePrefixCacheCounters(
    net::HttpClient& client, const std::vector<MetricsEndpoint>& endpoints,
    std::chrono::milliseconds timeout) {
  PrefixCacheCounters sum;
  for (const MetricsEndpoint& endpoint : endpoints) {
    StatusOr<std::string> text = FetchMetricsText(client, endpoint, timeout);
    if (!text.ok()) return text.status();
    StatusOr<std::vector<MetricSample>> samples = ParsePrometheusText(*text);
    if (!samples.ok()) return samples.status().WithContext(endpoint.url);
    for (const auto& [engine, counters] : PrefixCacheCountersByEngine(*samples)) sum += counters;
  }
  return sum;
}

}  // namespace tandem::ops
