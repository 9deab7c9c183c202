// The proxy's /metrics: its own tandem_proxy_* series followed by the engine series
// (vllm:* and tandem_*) of every backend it routes to, scraped on demand, with each
// backend's `engine` label set to "<role>@<host:port>" so that `tandem watch` and
// dashboards pointed at the proxy see every engine apart.
// Thread safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::proxy {

struct ScrapedBackend {
  std::string engine;  // the new `engine` label value, e.g. "decode@127.0.0.1:8200"
  std::string text;    // its /metrics body (Prometheus text)
};

// `own` unchanged, then the backends' vllm:* / tandem_* families other than
// tandem_proxy_* (one HELP/TYPE per family), relabelled.
std::string MergeBackendMetrics(std::string_view own, const std::vector<ScrapedBackend>& backends);

}  // namespace tandem::proxy
