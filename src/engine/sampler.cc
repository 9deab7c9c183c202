#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/sampling_ops.h"

namespace tandem {

int32_t Argmax(const float* logits, int32_t n_vocab) {
  return static_cast<int32_t>(ArgmaxIndex(logits, n_vocab));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

// No top-k / top-p: the same draw as the candidate list below (tokens in index order,
// the same probabilities), with the probabilities written over the logits instead of
// into a 262k-entry list (SamplingWeights: one vectorized pass).
int32_t Sampler::SampleAll(float* logits, int32_t n_vocab, float max, float inv_t, float floor) {
  int64_t last = -1;
  const double total = SamplingWeights(logits, n_vocab, max, inv_t, floor, &last);
  if (last < 0) return 0;  // unreachable: the largest logit weighs e^0 = 1 >= floor
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (int64_t i = 0; i <= last; ++i) {
    if (logits[i] == 0.0f) continue;
    r -= logits[i];
    if (r <= 0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

int32_t Sampler::Sample(float* logits, int32_t n_vocab) {
  // As vLLM does, a temperature below 1e-5 is greedy: 1 / T would overflow float for a
  // tiny T, and e^((l - max) / T) is then 0 * inf = NaN even for the largest logit.
  if (params_.temperature < kGreedyTemperature) return Argmax(logits, n_vocab);

  // Everything below is O(n_vocab) except the sort of the (few) top-k / nucleus
  // survivors: a full sort of a 262k vocabulary per token would cost more than the
  // forward pass of a small model.
  const float inv_t = 1.0f / params_.temperature;
  const float max = MaxFinite(logits, n_vocab);
  if (max == -INFINITY) return Argmax(logits, n_vocab);
  // Unnormalised probabilities; min_p keeps tokens with p >= min_p * p_max (p_max -> 1).
  const float floor = params_.min_p > 0.0f ? params_.min_p : 0.0f;
  const bool top_k_cuts = params_.top_k > 0 && params_.top_k < n_vocab;
  if (!top_k_cuts && params_.top_p >= 1.0f) return SampleAll(logits, n_vocab, max, inv_t, floor);
  candidates_.clear();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (!std::isfinite(logits[i])) continue;
    const float p = ExpNonPositive((logits[i] - max) * inv_t);
    if (p >= floor && p > 0.0f) candidates_.emplace_back(p, i);
  }
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(),
                     by_prob);
    candidates_.resize(params_.top_k);
  }
  if (params_.top_p < 1.0f) {
    double total = 0;
    for (const auto& c : candidates_) total += c.first;
    const double target = params_.top_p * total;
    // Grow a sorted prefix until it holds top_p of the mass (usually a few dozen tokens).
    size_t k = std::min<size_t>(64, candidates_.size());
    while (true) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), by_prob);
      double cum = 0;
      size_t n = 0;
      while (n < k && cum < target) cum += candidates_[n++].first;
      if (cum >= target || k == candidates_.size()) {
        candidates_.resize(std::max<size_t>(1, n));
        break;
      }
      k = std::min(candidates_.size(), k * 4);
    }
  }
  if (candidates_.empty()) return 0;  // unreachable, as in SampleAll
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
