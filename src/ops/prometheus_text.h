// Parsing of the Prometheus text exposition format (version 0.0.4), as served on
// `/metrics` by `tandem serve`, `tandem proxy`, `tandem pool` and vLLM.
//
// Only samples are returned: `# HELP` / `# TYPE` comments are skipped, and an optional
// trailing timestamp is dropped. Label values are unescaped (\\, \", \n). Values accept
// Go's float spellings, including NaN, +Inf and -Inf.
//
// Thread safety: pure functions and value types.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

struct MetricSample {
  std::string name;  // e.g. "vllm:prefix_cache_hits_total"
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses a whole exposition. InvalidArgument names the first malformed line (1-based).
StatusOr<std::vector<MetricSample>> ParsePrometheusText(std::string_view text);

}  // namespace tandem::ops
