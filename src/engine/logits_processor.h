// Per-request transformations of a logits row before sampling (vLLM semantics), and
// log-probabilities for the `logprobs` option.
//
// Thread safety: pure functions over the caller's buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"

namespace tandem {

class Tokenizer;

// Applies, in place: repetition penalty (over prompt and output tokens; positive logits
// divided, negative multiplied), frequency and presence penalties (output tokens), and
// masks EOS / stop token ids while fewer than min_tokens have been generated.
// `pending`: tokens counted as output after the request's own (the drafts a
// verification has accepted before this row; rejection_sampler.h).
void ApplyLogitsProcessors(const Request& request, const Tokenizer& tokenizer, float* logits,
                           int32_t n_vocab, std::span<const int32_t> pending = {});

// log_softmax(raw logits)[token] and the top `n` alternatives (n may be 0).
TokenLogprob ComputeLogprobs(const float* raw_logits, int32_t n_vocab, int32_t token, int n);

}  // namespace tandem
