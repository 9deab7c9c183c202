#include "engine/step_draw.h"

#include "common/thread_pool.h"
#include "engine/logits_processor.h"
#include "engine/request.h"
#include "model/tokenizer.h"

namespace tandem {

StepDraw DrawToken(Request* r, float* logits, const Tokenizer& tokenizer, int32_t n_vocab) {
  thread_local std::vector<float> raw;
  StepDraw d;
  d.r = r;
  const bool want_logprobs = r->params.logprobs >= 0;
  if (want_logprobs) raw.assign(logits, logits + n_vocab);
  ApplyLogitsProcessors(*r, tokenizer, logits, n_vocab);
  const std::vector<int32_t>& script = r->params.scripted_tokens;
  if (!script.empty() && r->num_output_tokens() >= static_cast<int>(script.size())) return d;
  if (r->constraint != nullptr && script.empty() && !r->constraint->ApplyMask(logits, n_vocab)) {
    // A dead end (no token of this vocabulary continues the grammar): end-of-generation.
    for (int32_t t : tokenizer.vocab().eog_ids) {
      if (t >= 0 && t < n_vocab) logits[t] = 0.0f;
    }
  }
  d.token = script.empty() ? r->sampler.Sample(logits, n_vocab) : script[r->num_output_tokens()];
  if (want_logprobs) d.lp = ComputeLogprobs(raw.data(), n_vocab, d.token, r->params.logprobs);
  return d;
}

std::vector<StepDraw> DrawTokens(const std::vector<DrawInput>& inputs, const Tokenizer& tokenizer, int32_t n_vocab,
                                 ThreadPool* pool) {
  std::vector<StepDraw> draws(inputs.size());
  auto draw = [&](int, int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) draws[k] = DrawToken(inputs[k].r, inputs[k].logits, tokenizer, n_vocab);
  };
  pool->ParallelFor(static_cast<int64_t>(inputs.size()), 1, draw);
  return draws;
}

}  // namespace tandem
