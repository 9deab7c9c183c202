// The output of `tandem bench serve`: vLLM's "Serving Benchmark Result" block on stdout
// and its result-file JSON fields (plus the workload and prefix-cache hit rates), so
// existing tooling reads Tandem results.
//
// Thread safety: pure functions and value types.
#pragma once

#include <optional>
#include <string>

#include "ops/bench_runner.h"
#include "ops/bench_stats.h"
#include "ops/bench_workload.h"
#include "ops/prefix_cache_stats.h"

namespace tandem::ops {

struct BenchReport {
  std::string date;      // "20261130-074000", as vLLM's result file names
  std::string base_url;  // "http://host:port"
  BenchRunOptions run_options;
  WorkloadOptions workload;
  GoodputSlos slos;
  BenchMetrics metrics;
  BenchRun run;
  // Increase of the engines' prefix-cache counters over the run (from /metrics), when
  // they could be scraped before and after.
  std::optional<PrefixCacheCounters> cache_increase;
};

// The human-readable result block.
std::string FormatBenchReport(const BenchReport& report);

// The result file: vLLM's field names (duration, completed, total_input_tokens,
// request_throughput, request_goodput, mean/median/std/p99 of ttft/tpot/itl/e2el in ms,
// input_lens, output_lens, ttfts, itls, errors, ...) plus "workload" and "prefix_cache".
std::string BenchReportJson(const BenchReport& report);

}  // namespace tandem::ops
