#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace tandem {

int32_t Argmax(const float* logits, int32_t n_vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::Sample(float* logits, int32_t n_vocab) {
  if (params_.temperature <= 0.0f) return Argmax(logits, n_vocab);

  candidates_.clear();
  candidates_.reserve(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (std::isfinite(logits[i])) candidates_.emplace_back(logits[i] / params_.temperature, i);
  }
  if (candidates_.empty()) return Argmax(logits, n_vocab);
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Softmax over the survivors.
  const float max = candidates_[0].first;
  double sum = 0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max);
    sum += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);

  if (params_.min_p > 0.0f) {
    const float floor = candidates_[0].first * params_.min_p;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= floor) ++n;
    candidates_.resize(n);
  }
  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cum += candidates_[n].first;
      ++n;
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(std::max<size_t>(1, n));
  }
  double total = 0;
  for (const auto& c : candidates_) total += c.first;
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace tandem
