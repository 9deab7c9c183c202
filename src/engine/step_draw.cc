#include "engine/step_draw.h"

#include "common/thread_pool.h"
#include "engine/logits_processor.h"
#include "engine/request.h"

namespace tandem {

std::vector<StepDraw> DrawTokens(const std::vector<Request*>& requests, const Tokenizer& tokenizer, int32_t n_vocab,
                                 float* logits, ThreadPool* pool) {
  std::vector<StepDraw> draws(requests.size());
  auto draw = [&](int, int64_t begin, int64_t end) {
    thread_local std::vector<float> raw;
    for (int64_t k = begin; k < end; ++k) {
      StepDraw& d = draws[k];
      Request* r = requests[k];
      d.r = r;
      float* row = logits + k * n_vocab;
      const bool want_logprobs = r->params.logprobs >= 0;
      if (want_logprobs) raw.assign(row, row + n_vocab);
      ApplyLogitsProcessors(*r, tokenizer, row, n_vocab);
      const std::vector<int32_t>& script = r->params.scripted_tokens;
      if (!script.empty() && r->num_output_tokens() >= static_cast<int>(script.size())) continue;
      d.token = script.empty() ? r->sampler.Sample(row, n_vocab) : script[r->num_output_tokens()];
      if (want_logprobs) d.lp = ComputeLogprobs(raw.data(), n_vocab, d.token, r->params.logprobs);
    }
  };
  pool->ParallelFor(static_cast<int64_t>(requests.size()), 1, draw);
  return draws;
}

}  // namespace tandem
