// OutputProcessor: the engine step's output stage. Turns accepted tokens into
// RequestOutput deltas — the structured-output grammar's acceptance, incremental
// detokenization (complete UTF-8 only), stop conditions (EOS, stop token ids, stop
// strings, max_tokens, a grammar that can take nothing more) and holding back text
// that may be the start of a stop string — and delivers them through the request's
// callback, the final one with the request's metrics and log line.
//
// Thread safety: engine thread only.
#pragma once

#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/request.h"

namespace tandem {

class EngineMetrics;
class Tokenizer;

// What emitting one token did (OutputProcessor::Emit).
struct EmitResult {
  std::string finish_reason;  // empty: the request goes on; else "stop" | "length" | "error"
  Status error;               // with "error"
};

class OutputProcessor {
 public:
  // Both borrowed; they outlive the processor.
  OutputProcessor(const Tokenizer& tokenizer, EngineMetrics* metrics) : tokenizer_(tokenizer), metrics_(metrics) {}

  // Emits one accepted token: checks it against the request's grammar (only a token
  // drawn elsewhere, a PD producer's first token, can be refused: "error") and advances
  // it, appends it (AppendToken), and ends the request when the grammar can take
  // nothing more. The token waits in the request's pending output (Send).
  EmitResult Emit(Request& request, int32_t token, const TokenLogprob* logprob);

  // Whether a request may go on after `token`, drawn by another engine (PD) or a
  // pool load's producer: it would not have drawn it differently (no logprobs, no
  // script) and its grammar takes it.
  bool CanContinueAfter(const Request& request, int32_t token) const;

  // Sends the pending delta through the request's callback (nothing when empty).
  void Send(Request& request);

  // The request's final output: what is pending, `finish_reason`, `error` (with
  // "error"), `stop_reason` (non-empty: replaces the one found) and the producer's
  // kv_transfer_params; counts the request in the metrics and logs its line (with the
  // num_computed_tokens the deployment guides grep for), then calls the callback.
  void Finish(Request& request, const std::string& finish_reason, const Status& error,
              const std::string& stop_reason, std::optional<KvTransferParams> kv_transfer_params);

  // Appends `token` to the request and updates its pending output. Returns the finish
  // reason ("stop" / "length") when this token ends the request.
  std::optional<std::string> AppendToken(Request& request, int32_t token, const TokenLogprob* logprob);

  // Builds the delta to send now (and clears it from the request). `finish_reason`
  // empty = not finished (text that may begin a stop string is held back).
  RequestOutput TakeOutput(Request& request, const std::string& finish_reason);

 private:
  const Tokenizer& tokenizer_;
  EngineMetrics* metrics_;
};

}  // namespace tandem
