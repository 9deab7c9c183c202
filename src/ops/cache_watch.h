// CacheWatch: the state behind `tandem watch` — per-engine and total prefix-cache hit
// rates (local, pool, effective) over the last window and since start, from successive
// scrapes of one or more `/metrics` endpoints (engines or a proxy); and, for endpoints
// that are KV-pool workers, the hit rate of each pool tier (memory, disk).
//
// An engine is identified by the endpoint it was scraped from and its `engine` label, so
// several engines behind one endpoint and one engine per endpoint both work. A window is
// the difference between an engine's last two successful scrapes.
//
// Thread safety: not thread-safe; one thread feeds and formats.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "ops/pool_tier_stats.h"
#include "ops/prefix_cache_stats.h"

namespace tandem::ops {

struct WatchRow {
  std::string name;            // "host:port engine=0", or "total"
  PrefixCacheCounters window;  // increase since the previous scrape (zero on the first)
  PrefixCacheCounters total;   // cumulative
  HitRates rates;
};

struct PoolWatchRow {
  std::string name;  // the endpoint
  PoolTierRates window;
  PoolTierRates total;
};

struct WatchReport {
  std::vector<PoolWatchRow> pool_rows;  // one per pool-worker endpoint
  std::vector<WatchRow> rows;           // one per engine, then "total"
  std::vector<std::string> errors;      // one line per endpoint that failed this scrape
};

class CacheWatch {
 public:
  // `sources` names the endpoints ("host:port"), in the order scrapes are passed.
  explicit CacheWatch(std::vector<std::string> sources);

  // One scrape: scrapes[i] is the `/metrics` body of sources[i], or why it failed.
  // Preconditions: scrapes.size() == number of sources.
  WatchReport Update(const std::vector<StatusOr<std::string>>& scrapes);

 private:
  struct Engine {
    size_t source = 0;
    std::string label;
    PrefixCacheCounters last;
  };
  std::vector<std::string> sources_;
  std::vector<Engine> engines_;                             // in order of first appearance
  std::vector<std::optional<PoolTierCounters>> pool_last_;  // per source
};

// The report as text: a header line with the time and window length, a column line, one
// line per row; rates as percentages with one decimal, "-" where undefined; then, when
// pool workers were scraped, a pool-tier table; then errors.
std::string FormatWatchReport(const WatchReport& report, const std::string& timestamp,
                              double window_s);

}  // namespace tandem::ops
