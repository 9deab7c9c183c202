#include "ops/cache_watch.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace tandem::ops {

CacheWatch::CacheWatch(std::vector<std::string> sources)
    : sources_(std::move(sources)), pool_last_(sources_.size()) {}

WatchReport CacheWatch::Update(const std::vector<StatusOr<std::string>>& scrapes) {
  WatchReport report;
  WatchRow total_row{"total", {}, {}, {}};
  for (size_t source = 0; source < sources_.size() && source < scrapes.size(); ++source) {
    const StatusOr<std::string>& body = scrapes[source];
    StatusOr<std::vector<MetricSample>> samples =
        body.ok() ? ParsePrometheusText(*body) : StatusOr<std::vector<MetricSample>>(body.status());
    if (!samples.ok()) {
      report.errors.push_back(sources_[source] + ": " + samples.status().ToString());
      continue;
    }
    if (std::optional<PoolTierCounters> pool = PoolTierCountersFrom(*samples)) {
      PoolWatchRow row;
      row.name = sources_[source];
      row.total = ComputePoolTierRates(*pool);
      // First sight: an empty window.
      PoolTierCounters window = pool_last_[source] ? PoolTierIncrease(*pool_last_[source], *pool)
                                                   : PoolTierCounters{0, 0, 0, 0, pool->has_disk};
      row.window = ComputePoolTierRates(window);
      pool_last_[source] = pool;
      report.pool_rows.push_back(std::move(row));
    }
    for (const auto& entry : PrefixCacheCountersByEngine(*samples)) {
      // Named copies, not a structured binding: lambdas capture them under clang too.
      const std::string& label = entry.first;
      const PrefixCacheCounters& counters = entry.second;
      auto it = std::find_if(engines_.begin(), engines_.end(), [&](const Engine& e) {
        return e.source == source && e.label == label;
      });
      WatchRow row;
      row.name = sources_[source] + (label.empty() ? "" : " engine=" + label);
      row.total = counters;
      if (it == engines_.end()) {
        engines_.push_back({source, label, counters});  // first sight: an empty window
      } else {
        row.window = CounterIncrease(it->last, counters);
        it->last = counters;
      }
      row.rates = ComputeHitRates(row.window, row.total);
      total_row.window += row.window;
      total_row.total += row.total;
      report.rows.push_back(std::move(row));
    }
  }
  total_row.rates = ComputeHitRates(total_row.window, total_row.total);
  report.rows.push_back(std::move(total_row));
  return report;
}

namespace {

std::string Percent(const std::optional<double>& rate) {
  if (!rate) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", *rate * 100.0);
  return buf;
}

}  // namespace

std::string FormatWatchReport(const WatchReport& report, const std::string& timestamp,
                              double window_s) {
  size_t name_width = 6;  // "engine"
  for (const WatchRow& row : report.rows) name_width = std::max(name_width, row.name.size());
  char buf[512];
  std::string out = "# " + timestamp;
  std::snprintf(buf, sizeof(buf), " window %.1f s\n", window_s);
  out += buf;
  std::snprintf(buf, sizeof(buf), "%-*s %10s %11s %8s %9s %9s\n", static_cast<int>(name_width),
                "engine", "local_win", "local_total", "ext_win", "ext_total", "eff_total");
  out += buf;
  for (const WatchRow& row : report.rows) {
    const HitRates& r = row.rates;
    std::snprintf(buf, sizeof(buf), "%-*s %10s %11s %8s %9s %9s\n", static_cast<int>(name_width),
                  row.name.c_str(), Percent(r.local_win).c_str(), Percent(r.local_total).c_str(),
                  Percent(r.ext_win).c_str(), Percent(r.ext_total).c_str(),
                  Percent(r.eff_total).c_str());
    out += buf;
  }
  if (!report.pool_rows.empty()) {
    size_t pool_width = 4;  // "pool"
    for (const PoolWatchRow& row : report.pool_rows)
      pool_width = std::max(pool_width, row.name.size());
    std::snprintf(buf, sizeof(buf), "%-*s %8s %10s %9s %11s %8s %10s\n",
                  static_cast<int>(pool_width), "pool", "mem_win", "mem_total", "disk_win",
                  "disk_total", "all_win", "all_total");
    out += buf;
    for (const PoolWatchRow& row : report.pool_rows) {
      std::snprintf(buf, sizeof(buf), "%-*s %8s %10s %9s %11s %8s %10s\n",
                    static_cast<int>(pool_width), row.name.c_str(),
                    Percent(row.window.memory).c_str(), Percent(row.total.memory).c_str(),
                    Percent(row.window.disk).c_str(), Percent(row.total.disk).c_str(),
                    Percent(row.window.combined).c_str(), Percent(row.total.combined).c_str());
      out += buf;
    }
  }
  for (const std::string& error : report.errors) out += "# error " + error + "\n";
  return out;
}

}  // namespace tandem::ops
