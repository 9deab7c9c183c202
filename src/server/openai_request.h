// Parsed OpenAI / vLLM request bodies and the functions that parse and validate them.
//
// Parsing is pure (no engine, no sockets) so every validation rule is unit-testable. It
// follows vLLM's protocol models: null means absent, unknown fields are accepted and
// listed in `ignored_fields`, out-of-range sampling values are InvalidArgument with
// vLLM's messages. Checks that need the tokenized prompt (context length) live in
// ResolveMaxTokens.
//
// Errors: InvalidArgument (HTTP 400) for every malformed or out-of-range input;
// Unimplemented (HTTP 400 too, see HttpStatusFor) for features not supported yet
// (n > 1, echo, several prompts).
// Thread safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "server/kv_transfer_params.h"

namespace tandem::server {

// The largest `logprobs` / `top_logprobs` accepted (vLLM's default --max-logprobs).
inline constexpr int kMaxLogprobs = 20;

// Fields shared by /v1/completions and /v1/chat/completions.
struct SamplingRequest {
  std::string model;                  // empty = the served model
  GenerationParams params;            // everything but max_tokens is final after parsing
  std::optional<int64_t> max_tokens;  // as requested; ResolveMaxTokens fills params.max_tokens
  std::optional<int64_t> max_tokens_cap;  // generation_config's max_new_tokens, when max_tokens is unset
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  bool continuous_usage = false;            // stream_options.continuous_usage_stats (vLLM)
  RequestKvTransfer kv_transfer;            // kv_transfer_params (PD), parsed
  std::string user;                         // the end user (OpenAI's); in the request log line
  std::string request_id;                   // vLLM's request_id (X-Request-Id wins); empty = none
  // vLLM's truncate_prompt_tokens: keep only the last k prompt tokens (-1: max_model_len).
  std::optional<int64_t> truncate_prompt_tokens;
  std::vector<std::string> ignored_fields;  // unknown fields (logged, as vLLM does)
  // Structured outputs (structured_output_request.h): what the output is constrained
  // to, and the request field it came from (for error messages).
  std::optional<grammar::StructuredOutputSpec> structured_output;
  std::string structured_output_field;
};

struct CompletionRequest {
  SamplingRequest sampling;
  std::string prompt_text;             // when !prompt_is_tokens
  std::vector<int32_t> prompt_tokens;  // when prompt_is_tokens
  bool prompt_is_tokens = false;
  bool add_special_tokens = true;  // vLLM's default for completions
};

// `tool_choice` (vLLM's rules: "auto" when absent and tools are given, else "none").
// "required" and a named function force the call with a grammar (ToolCallSpec in
// structured_output_request.h).
enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ChatRequest {
  SamplingRequest sampling;
  std::string messages_json;  // JSON array, non-empty
  std::string tools_json;     // JSON array, or empty
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_json;           // as sent (for the template), or empty when absent
  bool parallel_tool_calls = true;        // false: "required" forces exactly one call
  bool enable_thinking = true;            // chat_template_kwargs.enable_thinking
  std::string chat_template_kwargs_json;  // JSON object, or empty
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = false;  // vLLM's default for chat
};

// POST /tokenize: either a prompt or chat messages.
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  std::string prompt;
  std::string messages_json;
  std::string tools_json;
  std::string chat_template_kwargs_json;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = true;  // default true for a prompt, false for messages
  bool return_token_strs = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Sampling defaults for fields a request leaves out, from the model's
// generation_config.json as vLLM's `--generation-config auto` takes them (and
// `--override-generation-config`); unset members keep OpenAI's defaults.
struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<int64_t> max_tokens;  // max_new_tokens: caps the default max_tokens

  bool empty() const {
    return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !max_tokens;
  }
};

// `vocab_size` bounds token ids given in the body; `defaults` fill the sampling fields
// the body leaves out.
StatusOr<CompletionRequest> ParseCompletionRequest(std::string_view body, int32_t vocab_size,
                                                   const GenerationDefaults& defaults = {});
StatusOr<ChatRequest> ParseChatRequest(std::string_view body, const GenerationDefaults& defaults = {});
StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body);
StatusOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, int32_t vocab_size);

// Sets request->params.max_tokens from the requested value (or, when unset,
// `default_max_tokens`, where nullopt means "the rest of the context" as vLLM does for
// chat) and checks prompt + max_tokens against max_model_len with vLLM's messages.
Status ResolveMaxTokens(int prompt_tokens, int max_model_len, std::optional<int> default_max_tokens,
                        SamplingRequest* request);

// The HTTP status for a Status returned by parsing or by the engine.
int HttpStatusFor(const Status& status);

}  // namespace tandem::server
