// `tandem watch -u URL -i SECONDS [-o FILE]`: prefix-cache hit rates (local, pool,
// effective) per engine and in total, and the hit rate of each tier of the KV-pool
// workers given (their /metrics URL), every interval (ops/cache_watch.h).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "net/http_client.h"
#include "ops/cache_watch.h"
#include "ops/metrics_scrape.h"

namespace tandem::cli {
namespace {

struct WatchFlags {
  std::vector<std::string> urls;
  double interval_s = 5;
  std::string output;
  int count = 0;  // reports to print; 0 = until stopped
  double timeout_s = 5;
  std::string api_key;
};

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

int RunWatch(WatchFlags f) {
  if (const char* env = std::getenv("VLLM_API_KEY"); f.api_key.empty() && env != nullptr)
    f.api_key = env;
  std::vector<ops::MetricsEndpoint> endpoints;
  std::vector<std::string> names;
  for (const std::string& url : f.urls) {
    auto endpoint = ops::ParseMetricsEndpoint(url);
    if (!endpoint.ok()) return ReportError(endpoint.status().WithContext("-u " + url));
    endpoint->api_key = f.api_key;
    names.push_back(endpoint->name);
    endpoints.push_back(*endpoint);
  }
  std::ofstream file;
  if (!f.output.empty()) {
    file.open(f.output, std::ios::app);
    if (!file) return ReportError(InvalidArgumentError("-o: cannot write " + f.output));
  }
  std::ostream& out = f.output.empty() ? std::cout : file;
  ops::CacheWatch watch(names);
  net::HttpClient client;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(f.interval_s));
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  for (int report = 0; f.count == 0 || report < f.count; ++report) {
    if (report > 0) std::this_thread::sleep_until(start + report * interval);
    std::vector<StatusOr<std::string>> scrapes;
    for (const ops::MetricsEndpoint& endpoint : endpoints) {
      scrapes.push_back(ops::FetchMetricsText(client, endpoint, timeout));
    }
    const auto now = std::chrono::steady_clock::now();
    out << ops::FormatWatchReport(watch.Update(scrapes), UtcNow(),
                                  std::chrono::duration<double>(now - last).count())
        << std::flush;
    last = now;
  }
  return 0;
}

}  // namespace

void RegisterWatch(CLI::App& app, RunFn* run) {
  auto flags = std::make_shared<WatchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "watch", "prefix-cache hit rates (local, pool, effective) per engine, from /metrics");
  cmd->add_option("-u,--url", flags->urls,
                  "an engine's, the proxy's or a pool worker's address or /metrics URL "
                  "(repeatable)")
      ->required();
  cmd->add_option("-i,--interval", flags->interval_s, "seconds between scrapes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("-o,--output", flags->output, "append the reports to FILE instead of stdout");
  cmd->add_option("-n,--count", flags->count, "stop after N reports (0: run until stopped)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--timeout", flags->timeout_s, "scrape timeout, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--api-key", flags->api_key,
                  "bearer token for keyed engines and proxies (default: $VLLM_API_KEY)");
  cmd->callback([flags, run] { *run = [flags] { return RunWatch(*flags); }; });
}

}  // namespace tandem::cli
