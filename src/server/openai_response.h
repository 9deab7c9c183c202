// ResponseFormatter: turns engine outputs (RequestOutput) into OpenAI response bodies —
// the whole response for non-streaming requests, SSE chunk payloads for streaming ones —
// in vLLM's shapes:
//
//   completion  {"id":"cmpl-..","object":"text_completion","created":..,"model":..,
//                "choices":[{"index":0,"text":..,"logprobs":..,"finish_reason":..,
//                            "stop_reason":..,"prompt_logprobs":null}],
//                "usage":{"prompt_tokens":..,"total_tokens":..,"completion_tokens":..,
//                         "prompt_tokens_details":null|{"cached_tokens":..}},
//                "kv_transfer_params":null}
//   chat        object "chat.completion", choices[].message {"role":"assistant","content":..}
//   chunks      object "text_completion" / "chat.completion.chunk"; the first chat chunk
//               carries delta {"role":"assistant","content":""}; the usage chunk
//               (stream_options.include_usage) has "choices":[] and the usage.
//
// Chat with an output parser (--reasoning-parser / --tool-call-parser): the reply text
// goes through parsers::ChatOutputParser, so message and deltas carry `content`,
// `reasoning_content` and `tool_calls` as it splits them, and finish_reason becomes
// "tool_calls" when the reply called a tool.
//
// Pure: no I/O, no engine. Token texts for logprobs come from a callback.
// Thread safety: one formatter per request, used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/parsers/chat_output_parser.h"

namespace tandem::server {

enum class ApiKind { kCompletion, kChat };

struct ResponseContext {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;                                  // "cmpl-..." / "chatcmpl-..."
  std::string model;                               // the served model name
  int64_t created = 0;                             // unix seconds
  bool include_cached_tokens = false;              // --enable-prompt-tokens-details
  int logprobs = -1;                               // GenerationParams::logprobs of the request
  int index = 0;                                   // the choice's index (n > 1: 0..n-1)
  std::function<std::string(int32_t)> token_text;  // token id -> text (logprobs only)
};

struct UsageCounts {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

// vLLM's stop_reason as JSON text: null (EOS, length, abort), the matched stop string,
// or the matched stop token id (an integer).
std::string StopReasonJson(const RequestOutput& output, const GenerationParams& params);

// n > 1: one whole response (FinalResponse of choice 0, with the usage of all choices)
// with the `choices` of every response in `responses` (one FinalResponse per choice, in
// index order).
std::string MergeChoices(const std::vector<std::string>& responses);

class ResponseFormatter {
 public:
  // `output_parser` (chat only; may be null: the reply is all `content`) is owned.
  explicit ResponseFormatter(ResponseContext context,
                             std::unique_ptr<parsers::ChatOutputParser> output_parser = nullptr);

  // Streaming: the JSON payloads (without "data: ") to send for `output`, possibly none
  // (nothing new to say). For chat, the first call begins with the role chunk. When
  // output.finished the last payload carries finish_reason and `stop_reason_json`.
  // `usage` non-null adds vLLM's continuous usage stats to every chunk.
  std::vector<std::string> StreamChunks(const RequestOutput& output,
                                        const std::string& stop_reason_json,
                                        const UsageCounts* usage);

  // The final usage chunk for stream_options.include_usage.
  std::string UsageChunk(const UsageCounts& usage) const;

  // Non-streaming: accumulates text and logprobs of every output (the finished one
  // included) ...
  void Append(const RequestOutput& output);
  // ... and formats the whole response. `kv_transfer_params_json` empty = null.
  std::string FinalResponse(const std::string& finish_reason, const std::string& stop_reason_json,
                            const UsageCounts& usage,
                            const std::string& kv_transfer_params_json = "") const;

  const ResponseContext& context() const { return context_; }

 private:
  // The chat finish_reason to report for the engine's `reason`.
  std::string ChatFinishReason(const std::string& reason) const;
  // Streaming with an output parser.
  std::vector<std::string> ParsedStreamChunks(const RequestOutput& output,
                                              const std::string& stop_reason_json,
                                              const UsageCounts* usage);

  ResponseContext context_;
  std::unique_ptr<parsers::ChatOutputParser> output_parser_;  // null: no parsing
  bool sent_role_ = false;
  int64_t text_offset_ = 0;             // completions logprobs: offset of the next token's text
  std::string text_;                    // accumulated (non-streaming)
  std::vector<int32_t> tokens_;         // accumulated (non-streaming)
  std::vector<TokenLogprob> logprobs_;  // accumulated (non-streaming)
};

}  // namespace tandem::server
