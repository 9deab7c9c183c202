// The request bodies of the PD protocol (docs/KV_TRANSFER.md, "Request flow").
//
//   client body --PrefillBody--> prefiller: kv_transfer_params {do_remote_decode: true,
//                                 ...nulls}, stream false, max_tokens 1 (and
//                                 max_completion_tokens / min_tokens 1 when present),
//                                 no stream_options
//   client body + P's kv_transfer_params --DecodeBody--> decoder (the client's bytes,
//                                 with P's object spliced in verbatim)
//
// Plus the estimates the load balancer charges (prompt tokens, new tokens) and the
// continuation body a request is re-routed with after its decoder ended it with
// stop_reason "recomputed".
//
// Internal to src/proxy (exposes nlohmann::json). Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::proxy {

using Json = nlohmann::ordered_json;

// Compact JSON; invalid UTF-8 becomes U+FFFD instead of throwing.
std::string DumpJson(const Json& value);

// Parses a client body: InvalidArgument (with the parser's message) for malformed JSON or
// a top level that is not an object.
StatusOr<Json> ParseClientBody(std::string_view body);

// The body sent to the prefiller.
std::string PrefillBody(const Json& client_body);

// The body sent to the decoder: `raw_body` (the client's bytes, whose parse is
// `client_body`) with "kv_transfer_params": `kv_transfer_params` (raw JSON text, used
// verbatim) set. An empty `kv_transfer_params` leaves the body without the field (the
// prefiller is no producer; the decoder computes the prompt itself).
std::string DecodeBody(std::string_view raw_body, const Json& client_body,
                       std::string_view kv_transfer_params);

// Estimated prompt tokens: token-id prompts count exactly, text counts one token per 4
// bytes (rounded up), chat messages by their text content. At least 1.
int64_t EstimatePromptTokens(const Json& body);

// The requested new-token bound (max_tokens, else max_completion_tokens), clamped to
// [1, kMaxNewTokensEstimate], or `fallback`. A load estimate: engines refuse bounds past
// their context anyway, and the clamp keeps prompt + new tokens (and the sums of them the
// load balancer keeps) far from overflowing whatever a client sends.
inline constexpr int64_t kMaxNewTokensEstimate = int64_t{1} << 31;
int64_t MaxNewTokens(const Json& body, int64_t fallback);

// The body that continues `body` after `generated_tokens` tokens spelling
// `generated_text` were produced: a completion's string prompt gets the text appended;
// a chat gets an assistant message with it and continue_final_message; the token bounds
// shrink by `generated_tokens` (max_tokens at least 1). nullopt when the request cannot
// be continued (e.g. a token-id or multi-prompt completion).
std::optional<Json> ContinuationBody(const Json& body, bool chat, std::string_view generated_text,
                                     int64_t generated_tokens);

}  // namespace tandem::proxy
