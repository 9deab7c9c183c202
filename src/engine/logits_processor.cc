#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/tokenizer.h"

namespace tandem {

void ApplyLogitsProcessors(const Request& r, const Tokenizer& tokenizer, float* logits, int32_t n_vocab,
                           std::span<const int32_t> pending) {
  const GenerationParams& p = r.params;
  if (p.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen(r.tokens.begin(), r.tokens.end());
    seen.insert(pending.begin(), pending.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n_vocab) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int> with_pending;  // the counts with `pending` (rarely needed)
    if (!pending.empty()) {
      with_pending = r.output_counts;
      for (int32_t t : pending) ++with_pending[t];
    }
    for (const auto& [t, count] : pending.empty() ? r.output_counts : with_pending) {
      if (t < 0 || t >= n_vocab) continue;
      logits[t] -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (t >= 0 && t < n_vocab) logits[t] += bias;
  }
  if (r.num_output_tokens() + static_cast<int>(pending.size()) < p.min_tokens) {
    for (int32_t t : tokenizer.vocab().eog_ids) {
      if (t >= 0 && t < n_vocab) logits[t] = -INFINITY;
    }
    for (int32_t t : p.stop_token_ids) {
      if (t >= 0 && t < n_vocab) logits[t] = -INFINITY;
    }
  }
}

TokenLogprob ComputeLogprobs(const float* raw, int32_t n_vocab, int32_t token, int n) {
  float max = raw[0];
  for (int32_t i = 1; i < n_vocab; ++i) max = std::max(max, raw[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(raw[i]) - max);
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprob out;
  out.token = token;
  out.logprob = raw[token] - log_z;
  if (n > 0) {
    std::vector<int32_t> ids(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
    const int k = std::min<int>(n, n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); });
    for (int i = 0; i < k; ++i) out.top.emplace_back(ids[i], raw[ids[i]] - log_z);
  }
  return out;
}

}  // namespace tandem
