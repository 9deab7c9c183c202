#include "ops/prefix_cache_stats.h"

namespace tandem::ops {

PrefixCacheCounters& PrefixCacheCounters::operator+=(const PrefixCacheCounters& other) {
  local_queries_tokens += other.local_queries_tokens;
  local_hits_tokens += other.local_hits_tokens;
  ext_queries_tokens += other.ext_queries_tokens;
  ext_hits_tokens += other.ext_hits_tokens;
  return *this;
}

std::map<std::string, PrefixCacheCounters> PrefixCacheCountersByEngine(
    const std::vector<MetricSample>& samples) {
  std::map<std::string, PrefixCacheCounters> out;
  for (const MetricSample& s : samples) {
    double PrefixCacheCounters::*field = nullptr;
    if (s.name == kPrefixQueriesMetric) {
      field = &PrefixCacheCounters::local_queries_tokens;
    } else if (s.name == kPrefixHitsMetric) {
      field = &PrefixCacheCounters::local_hits_tokens;
    } else if (s.name == kExternalQueriesMetric) {
      field = &PrefixCacheCounters::ext_queries_tokens;
    } else if (s.name == kExternalHitsMetric) {
      field = &PrefixCacheCounters::ext_hits_tokens;
    } else {
      continue;
    }
    auto engine = s.labels.find("engine");
    out[engine == s.labels.end() ? std::string() : engine->second].*field += s.value;
  }
  return out;
}

PrefixCacheCounters CounterIncrease(const PrefixCacheCounters& before,
                                    const PrefixCacheCounters& after) {
  auto increase = [](double b, double a) { return a >= b ? a - b : a; };
  return {increase(before.local_queries_tokens, after.local_queries_tokens),
          increase(before.local_hits_tokens, after.local_hits_tokens),
          increase(before.ext_queries_tokens, after.ext_queries_tokens),
          increase(before.ext_hits_tokens, after.ext_hits_tokens)};
}

std::optional<double> Ratio(double numerator, double denominator) {
  if (!(denominator > 0)) return std::nullopt;
  return numerator / denominator;
}

HitRates ComputeHitRates(const PrefixCacheCounters& window, const PrefixCacheCounters& total) {
  HitRates r;
  r.local_win = Ratio(window.local_hits_tokens, window.local_queries_tokens);
  r.local_total = Ratio(total.local_hits_tokens, total.local_queries_tokens);
  r.ext_win = Ratio(window.ext_hits_tokens, window.ext_queries_tokens);
  r.ext_total = Ratio(total.ext_hits_tokens, total.ext_queries_tokens);
  r.eff_total = Ratio(total.local_hits_tokens + total.ext_hits_tokens, total.local_queries_tokens);
  return r;
}

}  // namespace tandem::ops
