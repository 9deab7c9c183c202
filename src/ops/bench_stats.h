// The statistics of `tandem bench serve`, defined as vLLM's `vllm bench serve` defines
// them, so figures compare one to one:
//   TTFT  time from sending a request to its first streamed token
//   TPOT  per request, (e2e latency - TTFT) / (output tokens - 1), for requests with
//         more than one output token
//   ITL   every gap between two successive streamed chunks, over all requests
//   E2EL  time from sending a request to its last byte
// Percentiles interpolate linearly between order statistics (numpy's default); std is
// the population standard deviation. Goodput counts the completed requests that meet
// every given SLO (TTFT, TPOT, E2EL in ms; TPOT of a one-token request counts as 0),
// per second of benchmark.
//
// Thread safety: pure functions and value types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

// What the client saw of one request.
struct RequestResult {
  bool success = false;
  std::string error;      // why it failed ("" on success)
  int prompt_tokens = 0;  // usage.prompt_tokens (0 when the server sent no usage)
  int cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens, when reported
  int output_tokens = 0;  // usage.completion_tokens, else the number of content chunks
  double ttft_s = 0;
  double latency_s = 0;       // end-to-end
  std::vector<double> itl_s;  // gaps between successive content chunks
  std::string generated_text;
  int group = -1;  // the shared-prefix group of its session (-1: none)
};

// Linear interpolation between order statistics; `percent` in [0, 100].
// Preconditions: `sorted` ascending. Empty input gives 0.
double Percentile(const std::vector<double>& sorted, double percent);

struct LatencySummary {  // milliseconds
  double mean_ms = 0;
  double median_ms = 0;
  double std_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
};

// Summary of durations given in seconds; all zeros for an empty input.
LatencySummary Summarize(std::vector<double> values_s);

struct GoodputSlos {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// Parses vLLM's `--goodput ttft:500 tpot:50 e2el:2000` items. InvalidArgument names the
// bad item (unknown key, missing or negative value).
StatusOr<GoodputSlos> ParseGoodputSlos(const std::vector<std::string>& items);

// True when the completed request `r` meets every SLO in `slos`.
bool MeetsSlos(const RequestResult& r, const GoodputSlos& slos);

struct BenchMetrics {
  int completed = 0;
  int failed = 0;
  double duration_s = 0;
  long total_input_tokens = 0;
  long total_output_tokens = 0;
  long total_cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens, summed
  // total_cached_tokens / total_input_tokens: the share of prompt tokens the engines
  // found in their prefix caches (nullopt without input tokens).
  std::optional<double> prefix_hit_rate;
  double request_throughput = 0;          // completed requests / s
  std::optional<double> request_goodput;  // requests meeting the SLOs / s (with SLOs only)
  double output_throughput = 0;           // output tokens / s
  double total_token_throughput = 0;      // (input + output tokens) / s
  LatencySummary ttft;
  LatencySummary tpot;
  LatencySummary itl;
  LatencySummary e2el;
};

// Preconditions: duration_s > 0.
BenchMetrics ComputeBenchMetrics(const std::vector<RequestResult>& results, double duration_s,
                                 const GoodputSlos& slos);

}  // namespace tandem::ops
