// SpecDecodeMetrics: vLLM's speculative-decoding series (vllm:spec_decode_*) and its
// periodic "SpecDecoding metrics:" log line.
//
// Thread safety: engine thread only (the registry itself is thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

class Counter;
class MetricsRegistry;

class SpecDecodeMetrics {
 public:
  // `registry` may be null (the log line still works). `num_speculative_tokens` >= 1.
  // `engine_index`: the `engine` label (EngineOptions::engine_index).
  SpecDecodeMetrics(MetricsRegistry* registry, const std::string& model_name, int num_speculative_tokens,
                    int engine_index = 0);

  // One draft of `drafted` tokens whose first `accepted` were accepted.
  void OnDraft(int drafted, int accepted);
  // Logs the line at most every 10 s, when there were drafts since the last one.
  void MaybeLog();

 private:
  Counter* drafts_ = nullptr;
  Counter* draft_tokens_ = nullptr;
  Counter* accepted_tokens_ = nullptr;
  std::vector<Counter*> accepted_per_pos_;
  // Window for the log line.
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
  int64_t window_drafts_ = 0;
  int64_t window_draft_tokens_ = 0;
  int64_t window_accepted_ = 0;
  std::vector<int64_t> window_per_pos_;
};

}  // namespace tandem
