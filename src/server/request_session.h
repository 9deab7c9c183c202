// RequestSession: one generation request in flight — the bridge between the engine's
// output callback (engine thread) and the client's HttpResponseWriter (I/O threads).
//
// Streaming requests get the SSE headers as soon as the engine accepted the request,
// then one `data:` event per engine output, the optional usage chunk, and
// `data: [DONE]`. Non-streaming requests get one JSON response when the request
// finishes. Either way a finished request logs one line with num_computed_tokens
// (prompt tokens actually run: prompt - cached), token counts, finish reason, latency.
//
// n > 1 (GenerationParams::n): one formatter per choice (RequestOutput::index); streams
// carry each choice's chunks with its index; the response (or the usage chunk and
// [DONE]) goes out once every choice finished, with prompt_tokens counted once and
// completion_tokens summed over the choices (as vLLM).
//
// Lifetime: shared by the engine callback and the writer's OnClose callback; lives until
// both are gone. A client disconnect aborts the engine request (Engine::AbortRequest).
// Thread safety: OnOutput (engine thread) and Begin (I/O thread) may race; a mutex
// orders them so the stream is started exactly once, before any chunk.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "net/http_response_writer.h"
#include "server/kv_transfer_params.h"
#include "server/openai_response.h"

namespace tandem::server {

struct SessionOptions {
  ResponseContext response;  // id doubles as the engine request id
  GenerationParams params;   // final (max_tokens resolved)
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage = false;        // stream_options.continuous_usage_stats
  RequestKvTransfer kv_transfer;        // the request's kv_transfer_params
  std::string user;                     // OpenAI's `user` (the end user), logged; empty = none
};

class RequestSession : public std::enable_shared_from_this<RequestSession> {
 public:
  // `output_parsers`: chat replies' reasoning/tool-call parsers (owned), one per choice
  // (params.n of them), or empty for none.
  RequestSession(SessionOptions options, std::shared_ptr<net::HttpResponseWriter> writer,
                 std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers);

  // Engine callback (engine thread). Never blocks beyond the session's own mutex.
  void OnOutput(const RequestOutput& output);

  // After the engine accepted the request: sends the stream headers (streaming only).
  void Begin();

  const SessionOptions& options() const { return options_; }

  // n > 1: called (engine thread) when one choice fails the whole response, to stop the
  // others. Set once, before the engine has the request.
  void set_abort(std::function<void()> abort) { abort_ = std::move(abort); }

 private:
  bool StartStreamLocked();
  void WriteEventLocked(const std::string& payload);
  // One choice ended; the last one ends the response.
  void ChoiceFinishedLocked(const RequestOutput& output);
  void FinishLocked(const RequestOutput& output);
  void LogFinished(const RequestOutput& output) const;

  const SessionOptions options_;
  const std::shared_ptr<net::HttpResponseWriter> writer_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::function<void()> abort_;  // may be empty

  std::mutex mu_;
  // Per choice (index): the formatter, and its finish_reason / stop_reason JSON once done.
  std::vector<ResponseFormatter> formatters_;  // guarded by mu_
  std::vector<std::string> finish_reasons_;    // guarded by mu_; empty = running
  std::vector<std::string> stop_reasons_;      // guarded by mu_
  int num_finished_ = 0;                       // choices done; guarded by mu_
  int completion_tokens_ = 0;                  // summed over finished choices; guarded by mu_
  bool stream_started_ = false;  // guarded by mu_
  bool finished_ = false;        // guarded by mu_
  double first_output_s_ = -1;   // seconds from start to the first token; guarded by mu_
};

// Submits `prompt_tokens` to the engine under options.response.id and answers through
// `writer`. Returns the engine's AddRequest status: on error nothing was sent and the
// caller answers (HttpStatusFor maps ResourceExhausted to 503). `output_parsers` as above.
Status SubmitGeneration(Engine& engine, std::vector<int32_t> prompt_tokens, SessionOptions options,
                        std::shared_ptr<net::HttpResponseWriter> writer,
                        std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers);

}  // namespace tandem::server
