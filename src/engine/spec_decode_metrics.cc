#include "engine/spec_decode_metrics.h"

#include <algorithm>
#include <cstdio>

#include "common/logging.h"
#include "common/metrics.h"

namespace tandem {

SpecDecodeMetrics::SpecDecodeMetrics(MetricsRegistry* registry, const std::string& model_name,
                                     int num_speculative_tokens, int engine_index)
    : window_per_pos_(static_cast<size_t>(num_speculative_tokens), 0) {
  if (registry == nullptr) return;
  const MetricLabels labels{{"model_name", model_name}, {"engine", std::to_string(engine_index)}};
  drafts_ = registry->GetCounter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels);
  draft_tokens_ =
      registry->GetCounter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels);
  accepted_tokens_ =
      registry->GetCounter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels);
  for (int pos = 0; pos < num_speculative_tokens; ++pos) {
    MetricLabels l = labels;
    l["position"] = std::to_string(pos);
    accepted_per_pos_.push_back(registry->GetCounter("vllm:spec_decode_num_accepted_tokens_per_pos",
                                                     "Accepted tokens per draft position.", l));
  }
}

void SpecDecodeMetrics::OnDraft(int drafted, int accepted) {
  ++window_drafts_;
  window_draft_tokens_ += drafted;
  window_accepted_ += accepted;
  for (int pos = 0; pos < accepted && pos < static_cast<int>(window_per_pos_.size()); ++pos) ++window_per_pos_[pos];
  if (drafts_ == nullptr) return;
  drafts_->Add(1);
  draft_tokens_->Add(drafted);
  accepted_tokens_->Add(accepted);
  for (int pos = 0; pos < accepted && pos < static_cast<int>(accepted_per_pos_.size()); ++pos) {
    accepted_per_pos_[pos]->Add(1);
  }
}

void SpecDecodeMetrics::MaybeLog() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - window_start_).count();
  if (elapsed < 10.0) return;
  if (window_drafts_ > 0) {
    // vLLM's wording: mean acceptance length counts the bonus token (1 + accepted / drafts).
    std::string per_pos;
    for (int64_t n : window_per_pos_) {
      char v[16];
      std::snprintf(v, sizeof(v), "%.3f", static_cast<double>(n) / window_drafts_);
      per_pos += (per_pos.empty() ? "" : ", ") + std::string(v);
    }
    char line[512];
    std::snprintf(line, sizeof(line),
                  "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
                  "Drafted throughput: %.2f tokens/s, Accepted: %lld tokens, Drafted: %lld tokens, "
                  "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
                  1.0 + static_cast<double>(window_accepted_) / window_drafts_, window_accepted_ / elapsed,
                  window_draft_tokens_ / elapsed, static_cast<long long>(window_accepted_),
                  static_cast<long long>(window_draft_tokens_), per_pos.c_str(),
                  window_draft_tokens_ > 0 ? 100.0 * window_accepted_ / window_draft_tokens_ : 0.0);
    TANDEM_LOG(INFO) << line;
  }
  window_start_ = now;
  window_drafts_ = 0;
  window_draft_tokens_ = 0;
  window_accepted_ = 0;
  std::fill(window_per_pos_.begin(), window_per_pos_.end(), 0);
}

}  // namespace tandem
