// Sampler: picks the next token from a row of logits.
//
// Greedy when temperature < 1e-5 (kGreedyTemperature); otherwise temperature, then top_k, top_p and
// min_p filtering, then a draw from the per-request RNG (seeded, so a seed reproduces the same
// tokens). Thread safety: one Sampler per sequence; not shared.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tandem {

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS).
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 0.0f;  // below kGreedyTemperature (0 included) = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Preconditions: n_vocab > 0. `logits` may be modified (used as scratch).
  int32_t Sample(float* logits, int32_t n_vocab);

  // Advances the RNG as one Sample() would, without sampling: a decode instance that
  // continues after the token its prefill instance drew stays on the same random stream.
  void Skip() {
    if (params_.temperature >= kGreedyTemperature) rng_.discard(1);  // Sample() draws one value
  }

 private:
  int32_t SampleAll(float* logits, int32_t n_vocab, float max, float inv_t, float floor);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

// Index of the largest logit (lowest index on ties).
int32_t Argmax(const float* logits, int32_t n_vocab);

}  // namespace tandem
