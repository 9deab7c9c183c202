#include "engine/rejection_sampler.h"

#include <optional>
#include <span>

#include "common/thread_pool.h"
#include "engine/logits_processor.h"
#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

// The draw of one row: `pending` are the drafts accepted before it, `constraint` the
// request's grammar state after them (null = unconstrained). -1: the script is used up.
int32_t DrawRow(Request* r, float* logits, std::span<const int32_t> pending, const GrammarConstraint* constraint,
                const Tokenizer& tokenizer, int32_t n_vocab, TokenLogprob* lp) {
  thread_local std::vector<float> raw;
  const bool want_logprobs = r->params.logprobs >= 0;
  if (want_logprobs) raw.assign(logits, logits + n_vocab);
  ApplyLogitsProcessors(*r, tokenizer, logits, n_vocab, pending);
  const std::vector<int32_t>& script = r->params.scripted_tokens;
  const int position = r->num_output_tokens() + static_cast<int>(pending.size());
  if (!script.empty() && position >= static_cast<int>(script.size())) return -1;
  if (constraint != nullptr && script.empty() && !constraint->ApplyMask(logits, n_vocab)) {
    // A dead end (no token of this vocabulary continues the grammar): end-of-generation.
    for (int32_t t : tokenizer.vocab().eog_ids) {
      if (t >= 0 && t < n_vocab) logits[t] = 0.0f;
    }
  }
  const int32_t token = script.empty() ? r->sampler.Sample(logits, n_vocab) : script[position];
  if (want_logprobs) *lp = ComputeLogprobs(raw.data(), n_vocab, token, r->params.logprobs);
  return token;
}

SampledTokens SampleRequest(const SampleInput& in, const Tokenizer& tokenizer, int32_t n_vocab) {
  SampledTokens out;
  Request* r = in.r;
  out.r = r;
  out.num_drafts = static_cast<int>(in.drafts.size());
  // The grammar state after the accepted drafts: the request's own for the first row, a
  // copy advanced draft by draft after it (end-of-generation tokens do not advance a
  // grammar, as in OutputProcessor::Emit).
  std::optional<GrammarConstraint> advanced;
  const GrammarConstraint* constraint = r->constraint.get();
  for (size_t i = 0; i <= in.drafts.size(); ++i) {
    TokenLogprob lp;
    const std::span<const int32_t> accepted(in.drafts.data(), i);
    const int32_t token = DrawRow(r, in.logits + static_cast<int64_t>(i) * n_vocab, accepted, constraint, tokenizer,
                                  n_vocab, &lp);
    if (token < 0) {
      out.script_done = true;
      break;
    }
    out.tokens.push_back(token);
    if (r->params.logprobs >= 0) out.logprobs.push_back(std::move(lp));
    if (i == in.drafts.size() || token != in.drafts[i]) break;
    ++out.num_accepted;
    if (constraint != nullptr && !tokenizer.IsEog(token)) {
      if (!advanced) advanced.emplace(*constraint);
      advanced->Accept(tokenizer.TokenToPiece(token, /*special=*/false));
      constraint = &*advanced;
    }
  }
  return out;
}

}  // namespace

std::vector<SampledTokens> SampleTokens(const std::vector<SampleInput>& inputs, const Tokenizer& tokenizer,
                                        int32_t n_vocab, ThreadPool* pool) {
  std::vector<SampledTokens> sampled(inputs.size());
  auto sample = [&](int, int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) sampled[k] = SampleRequest(inputs[k], tokenizer, n_vocab);
  };
  pool->ParallelFor(static_cast<int64_t>(inputs.size()), 1, sample);
  return sampled;
}

}  // namespace tandem
