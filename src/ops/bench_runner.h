// BenchRunner: drives the requests of `tandem bench serve` against an OpenAI-compatible
// endpoint and records what each stream looked like from the client.
//
// Requests are streamed (SSE) through one asynchronous HttpClient, so hundreds of
// concurrent streams cost no threads. Sessions start at their arrival times (see
// ArrivalTimes); a multi-turn session's next turn starts when its previous reply ends;
// with max_concurrency > 0 a ready request waits until fewer than that many are in
// flight. TTFT is taken at the first chunk that carries text, ITL between successive
// text chunks; token counts come from the final usage chunk (stream_options
// include_usage), else from the number of text chunks.
//
// Thread safety: Run() is called from one thread, which it blocks; it uses the client's
// I/O thread internally.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/bench_stats.h"
#include "ops/bench_workload.h"

namespace tandem::ops {

struct BenchTarget {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string endpoint = "/v1/completions";  // or "/v1/chat/completions"
  std::string model;
  std::string api_key;  // "Authorization: Bearer" when set
};

struct BenchRunOptions {
  BenchTarget target;
  double request_rate = std::numeric_limits<double>::infinity();  // sessions / s
  double burstiness = 1.0;
  int max_concurrency = 0;  // requests in flight; 0 = unlimited
  double temperature = 0.0;
  bool ignore_eos = false;
  uint64_t seed = 0;
  std::chrono::milliseconds request_timeout{600'000};
  // Multi-turn: seconds a session waits after a reply before its next turn (the user
  // reading and typing).
  double think_time_s = 0;
  // Called on the Run() thread whenever a request finishes (done, total); may be empty.
  std::function<void(int done, int total)> on_progress;
};

struct BenchRun {
  std::vector<RequestResult> results;  // in completion order
  double duration_s = 0;               // first send to last completion
  int max_in_flight = 0;
};

// True when `endpoint` is a chat endpoint (its path ends in "/chat/completions").
bool IsChatEndpoint(const std::string& endpoint);

// The JSON body of a request: the session's system prompt, earlier turns (`history`:
// user and assistant texts alternating) and turn `turn_index`. Chat endpoints get
// messages; completions get the texts joined with blank lines as the prompt.
std::string BuildRequestBody(const BenchRunOptions& options, const BenchSession& session,
                             size_t turn_index, const std::vector<std::string>& history);

// Runs every turn of every session; `arrival_s[i]` is when session i starts.
// Preconditions: arrival_s.size() == sessions.size().
BenchRun RunBenchmark(const BenchRunOptions& options, const std::vector<BenchSession>& sessions,
                      const std::vector<double>& arrival_s);

}  // namespace tandem::ops

namespace tandem::ops {

// The first model id of GET /v1/models (what vLLM's benchmark uses without --model).
StatusOr<std::string> FirstServedModel(const BenchTarget& target);

// Tokens per word of RandomWords text for the served model, from POST /tokenize (vLLM's
// and Tandem's); Unimplemented/Unavailable where the endpoint has none (a proxy).
StatusOr<double> MeasureTokensPerWord(const BenchTarget& target);

// "  37/100 [=======>          ]  12.3 s" (a progress line, without CR or LF).
std::string FormatProgress(int done, int total, double elapsed_s);

}  // namespace tandem::ops
