#include "ops/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace tandem::ops {
namespace {

std::optional<double> Tpot(const RequestResult& r) {
  if (r.output_tokens <= 1) return std::nullopt;
  return (r.latency_s - r.ttft_s) / (r.output_tokens - 1);
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double percent) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(percent, 0.0, 100.0) / 100.0 * (sorted.size() - 1);
  const size_t lower = static_cast<size_t>(std::floor(rank));
  const size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double fraction = rank - lower;
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

LatencySummary Summarize(std::vector<double> values_s) {
  LatencySummary s;
  if (values_s.empty()) return s;
  std::sort(values_s.begin(), values_s.end());
  const double n = static_cast<double>(values_s.size());
  const double mean = std::accumulate(values_s.begin(), values_s.end(), 0.0) / n;
  double square_sum = 0;
  for (double v : values_s) square_sum += (v - mean) * (v - mean);
  s.mean_ms = mean * 1000;
  s.median_ms = Percentile(values_s, 50) * 1000;
  s.std_ms = std::sqrt(square_sum / n) * 1000;
  s.p90_ms = Percentile(values_s, 90) * 1000;
  s.p99_ms = Percentile(values_s, 99) * 1000;
  return s;
}

StatusOr<GoodputSlos> ParseGoodputSlos(const std::vector<std::string>& items) {
  GoodputSlos slos;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return InvalidArgumentError("--goodput item '" + item + "' is not KEY:MS");
    }
    const std::string key = item.substr(0, colon);
    const std::string value_text = item.substr(colon + 1);
    char* end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);
    if (value_text.empty() || *end != '\0' || !(value >= 0)) {
      return InvalidArgumentError("--goodput item '" + item +
                                  "': the SLO must be a non-negative number of ms");
    }
    if (key == "ttft") {
      slos.ttft_ms = value;
    } else if (key == "tpot") {
      slos.tpot_ms = value;
    } else if (key == "e2el") {
      slos.e2el_ms = value;
    } else {
      return InvalidArgumentError("--goodput key '" + key + "' is not one of ttft, tpot, e2el");
    }
  }
  return slos;
}

bool MeetsSlos(const RequestResult& r, const GoodputSlos& slos) {
  if (slos.ttft_ms && r.ttft_s * 1000 > *slos.ttft_ms) return false;
  if (slos.tpot_ms && Tpot(r).value_or(0) * 1000 > *slos.tpot_ms) return false;
  if (slos.e2el_ms && r.latency_s * 1000 > *slos.e2el_ms) return false;
  return true;
}

BenchMetrics ComputeBenchMetrics(const std::vector<RequestResult>& results, double duration_s,
                                 const GoodputSlos& slos) {
  BenchMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  int good = 0;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_tokens;
    m.total_output_tokens += r.output_tokens;
    m.total_cached_tokens += r.cached_tokens;
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
    if (auto tpot = Tpot(r)) tpots.push_back(*tpot);
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
    if (MeetsSlos(r, slos)) ++good;
  }
  if (m.total_input_tokens > 0) {
    m.prefix_hit_rate = static_cast<double>(m.total_cached_tokens) / m.total_input_tokens;
  }
  m.request_throughput = m.completed / duration_s;
  if (slos.any()) m.request_goodput = good / duration_s;
  m.output_throughput = m.total_output_tokens / duration_s;
  m.total_token_throughput = (m.total_input_tokens + m.total_output_tokens) / duration_s;
  m.ttft = Summarize(std::move(ttfts));
  m.tpot = Summarize(std::move(tpots));
  m.itl = Summarize(std::move(itls));
  m.e2el = Summarize(std::move(e2els));
  return m;
}

}  // namespace tandem::ops
