#include "ops/pool_tier_stats.h"

#include "ops/prefix_cache_stats.h"

namespace tandem::ops {

std::optional<PoolTierCounters> PoolTierCountersFrom(const std::vector<MetricSample>& samples) {
  PoolTierCounters c;
  bool found = false;
  for (const MetricSample& s : samples) {
    const bool hits = s.name == "tandem_pool_tier_hits_total";
    if (!hits && s.name != "tandem_pool_tier_misses_total") continue;
    auto tier = s.labels.find("tier");
    if (tier == s.labels.end()) continue;
    found = true;
    if (tier->second == "memory") {
      (hits ? c.memory_hits : c.memory_misses) += s.value;
    } else if (tier->second == "disk") {
      (hits ? c.disk_hits : c.disk_misses) += s.value;
    }
  }
  if (!found) return std::nullopt;
  for (const MetricSample& s : samples) {
    if (s.name == "tandem_pool_tier_capacity_bytes" && s.value > 0) {
      auto tier = s.labels.find("tier");
      if (tier != s.labels.end() && tier->second == "disk") c.has_disk = true;
    }
  }
  return c;
}

PoolTierCounters PoolTierIncrease(const PoolTierCounters& before, const PoolTierCounters& after) {
  auto increase = [](double b, double a) { return a >= b ? a - b : a; };
  PoolTierCounters d;
  d.memory_hits = increase(before.memory_hits, after.memory_hits);
  d.memory_misses = increase(before.memory_misses, after.memory_misses);
  d.disk_hits = increase(before.disk_hits, after.disk_hits);
  d.disk_misses = increase(before.disk_misses, after.disk_misses);
  d.has_disk = after.has_disk;
  return d;
}

PoolTierRates ComputePoolTierRates(const PoolTierCounters& c) {
  PoolTierRates r;
  r.memory = Ratio(c.memory_hits, c.memory_hits + c.memory_misses);
  if (c.has_disk) r.disk = Ratio(c.disk_hits, c.disk_hits + c.disk_misses);
  r.combined = Ratio(c.memory_hits + c.disk_hits, c.memory_hits + c.memory_misses);
  return r;
}

}  // namespace tandem::ops
