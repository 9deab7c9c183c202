// Prefix-cache hit rates of engines, from their `/metrics` counters (what `tandem watch`
// shows; an engine's series are vLLM's, the pool's are in docs/POOL.md "Metrics").
//
// Counters (tokens, cumulative since each engine started):
//   vllm:prefix_cache_queries_total           tokens looked up in the engine's own cache
//   vllm:prefix_cache_hits_total              ... of which were found there
//   vllm:external_prefix_cache_queries_total  tokens looked up in the pool (local misses)
//   vllm:external_prefix_cache_hits_total     ... of which the pool had
// Rates: local = hits / queries, ext = external hits / external queries, and
// effective = (local hits + external hits) / local queries. A rate over zero queries is
// undefined (std::nullopt), not zero.
//
// Thread safety: pure functions and value types.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/prometheus_text.h"

namespace tandem::ops {

inline constexpr char kPrefixQueriesMetric[] = "vllm:prefix_cache_queries_total";
inline constexpr char kPrefixHitsMetric[] = "vllm:prefix_cache_hits_total";
inline constexpr char kExternalQueriesMetric[] = "vllm:external_prefix_cache_queries_total";
inline constexpr char kExternalHitsMetric[] = "vllm:external_prefix_cache_hits_total";

struct PrefixCacheCounters {
  double local_queries_tokens = 0;
  double local_hits_tokens = 0;
  double ext_queries_tokens = 0;
  double ext_hits_tokens = 0;

  PrefixCacheCounters& operator+=(const PrefixCacheCounters& other);
};

// The counters of each engine in one scrape, keyed by the `engine` label ("" where a
// series has none). Series of one engine that differ in other labels (model_name) are
// summed. Engines without any of the four counters are absent.
std::map<std::string, PrefixCacheCounters> PrefixCacheCountersByEngine(
    const std::vector<MetricSample>& samples);

// after - before, per counter. A counter that went down was reset (the engine restarted),
// so its whole `after` value is the increase, as Prometheus' rate() assumes.
PrefixCacheCounters CounterIncrease(const PrefixCacheCounters& before,
                                    const PrefixCacheCounters& after);

struct HitRates {
  std::optional<double> local_win;    // over the window, [0, 1]
  std::optional<double> local_total;  // since start
  std::optional<double> ext_win;
  std::optional<double> ext_total;
  std::optional<double> eff_total;
};

// `window` is the increase over the window, `total` the cumulative counters.
HitRates ComputeHitRates(const PrefixCacheCounters& window, const PrefixCacheCounters& total);

// numerator / denominator, or nullopt when the denominator is not positive.
std::optional<double> Ratio(double numerator, double denominator);

}  // namespace tandem::ops
