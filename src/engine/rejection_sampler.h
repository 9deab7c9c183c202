// SampleTokens: the sampling stage of one engine step — logits processors, the
// structured-output mask, sampling over the whole vocabulary (or the request's script),
// logprobs, and the verification of speculative drafts — returning the tokens each
// request accepts. Requests are spread over the compute threads.
//
// Verification (rejection sampling, spec_decode.h): a request with drafts d_1..d_k has
// k + 1 rows; row i is drawn exactly as a step without drafts would draw it after
// d_1..d_i had been emitted (the processors see them as output, the grammar has
// advanced through them, the script is read past them); drawing stops at the first
// row whose token differs from its draft (that token is the last accepted) or after
// row k (the bonus token). Row i matters only when d_1..d_i were all accepted, so this
// is the same as emitting row by row. Each drawn row consumes one draw of the request's
// RNG, as without speculation.
//
// Thread safety: each task reads and writes only its own request's sampler and rows
// (the request's output state is read, never written); call from the engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace tandem {

class ThreadPool;
class Tokenizer;
struct Request;

// One request's rows to sample this step.
struct SampleInput {
  Request* r = nullptr;
  // [1 + drafts.size(), n_vocab] rows (modified in place): the row after the last token,
  // then one after each draft.
  float* logits = nullptr;
  std::vector<int32_t> drafts;  // the drafts verified after r->tokens.back() (empty: one draw)
};

// What a request accepts from its rows.
struct SampledTokens {
  Request* r = nullptr;
  // The accepted drafts, then the draw that ended the verification (a plain draw: one
  // token). Empty only when the script was used up at the first row.
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // parallel to tokens when the request asks for logprobs
  bool script_done = false;  // a scripted request whose script is used up after `tokens`
  int num_drafts = 0;        // drafts verified
  int num_accepted = 0;      // drafts equal to the draw of their row
};

std::vector<SampledTokens> SampleTokens(const std::vector<SampleInput>& inputs, const Tokenizer& tokenizer,
                                        int32_t n_vocab, ThreadPool* pool);

}  // namespace tandem
