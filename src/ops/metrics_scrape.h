// Scraping `/metrics` endpoints for `tandem watch` and `tandem bench serve`.
//
// Thread safety: functions; the HttpClient they are given is thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/http_client.h"
#include "ops/prefix_cache_stats.h"

namespace tandem::ops {

struct MetricsEndpoint {
  std::string url;   // "http://host:port/metrics"
  std::string name;  // "host:port", how reports name it
  std::string api_key;  // sent as "Authorization: Bearer KEY" when set (keyed engines, proxy)
};

// "host:port", "http://host:port" or a URL with a path: a URL without a path (or with
// "/") gets "/metrics". InvalidArgument when it does not parse (see net/url.h).
StatusOr<MetricsEndpoint> ParseMetricsEndpoint(const std::string& text);

// GETs the endpoint; Unavailable for a non-200 answer (and what the client returns).
StatusOr<std::string> FetchMetricsText(net::HttpClient& client, const MetricsEndpoint& endpoint,
                                       std::chrono::milliseconds timeout);

// The prefix-cache counters of every engine at these endpoints, summed.
StatusOr<PrefixCacheCounters> ScrapePrefixCacheCounters(
    net::HttpClient& client, const std::vector<MetricsEndpoint>& endpoints,
    std::chrono::milliseconds timeout);

}  // namespace tandem::ops
