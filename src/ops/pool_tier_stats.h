// Hit rates of a KV-pool worker's tiers, from its `/metrics` counters (docs/POOL.md):
//   tandem_pool_tier_hits_total{tier="memory"|"disk"}    gets of keys found in the tier
//   tandem_pool_tier_misses_total{tier="memory"|"disk"}  gets that looked there in vain
// A get looks in memory first, then (with a disk tier) on disk, so the disk rate is over
// the memory misses. Rates: tier hits / (hits + misses); combined = (memory hits + disk
// hits) / memory lookups. A rate over zero lookups is undefined (std::nullopt).
//
// Thread safety: pure functions and value types.
#pragma once

#include <optional>
#include <vector>

#include "ops/prometheus_text.h"

namespace tandem::ops {

struct PoolTierCounters {
  double memory_hits = 0;
  double memory_misses = 0;
  double disk_hits = 0;
  double disk_misses = 0;
  bool has_disk = false;  // the worker reports a disk tier
};

// The counters of one scrape, or nullopt when it has no tier counters (not a pool worker).
std::optional<PoolTierCounters> PoolTierCountersFrom(const std::vector<MetricSample>& samples);

// after - before per counter; a counter that went down restarted (whole `after` counts).
PoolTierCounters PoolTierIncrease(const PoolTierCounters& before, const PoolTierCounters& after);

struct PoolTierRates {
  std::optional<double> memory;
  std::optional<double> disk;
  std::optional<double> combined;
};

PoolTierRates ComputePoolTierRates(const PoolTierCounters& c);

}  // namespace tandem::ops
