// DrawTokens: the draws of one engine step — logits processors, sampling over the whole
// vocabulary (or the request's script), logprobs — for every request that samples,
// spread over the compute threads.
//
// Thread safety: each draw reads and writes only its own request's sampler and logits
// row; call from the engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace tandem {

class ThreadPool;
class Tokenizer;
struct Request;

struct StepDraw {
  Request* r = nullptr;
  int32_t token = -1;  // -1: a scripted request whose script is used up
  TokenLogprob lp;     // when the request asks for logprobs
};

// One request's logits row ([n_vocab], modified in place) to draw from.
struct DrawInput {
  Request* r = nullptr;
  float* logits = nullptr;
};

std::vector<StepDraw> DrawTokens(const std::vector<DrawInput>& inputs, const Tokenizer& tokenizer, int32_t n_vocab,
                                 ThreadPool* pool);

// The draw of one row on the calling thread (the same steps as DrawTokens).
StepDraw DrawToken(Request* r, float* logits, const Tokenizer& tokenizer, int32_t n_vocab);

}  // namespace tandem
