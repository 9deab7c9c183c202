// OutputProcessor: turns sampled tokens into RequestOutput deltas — incremental
// detokenization (complete UTF-8 only), stop conditions (EOS, stop token ids, stop
// strings, max_tokens) and holding back text that may be the start of a stop string.
//
// Thread safety: engine thread only.
#pragma once

#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/request.h"

namespace tandem {

class Tokenizer;

class OutputProcessor {
 public:
  explicit OutputProcessor(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Appends `token` to the request and updates its pending output. Returns the finish
  // reason ("stop" / "length") when this token ends the request.
  std::optional<std::string> AppendToken(Request& request, int32_t token, const TokenLogprob* logprob);

  // Builds the delta to send now (and clears it from the request). `finish_reason`
  // empty = not finished (text that may begin a stop string is held back).
  RequestOutput TakeOutput(Request& request, const std::string& finish_reason);

 private:
  const Tokenizer& tokenizer_;
};

}  // namespace tandem
