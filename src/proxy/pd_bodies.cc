#include "proxy/pd_bodies.h"

#include <algorithm>

#include "common/json_depth.h"

namespace tandem::proxy {
namespace {

int64_t TextTokens(size_t bytes) { return static_cast<int64_t>((bytes + 3) / 4); }

// Text of a chat message's content: a string, or the "text" of its parts.
size_t ContentBytes(const Json& content) {
  if (content.is_string()) return content.get_ref<const std::string&>().size();
  size_t n = 0;
  if (content.is_array()) {
    for (const Json& part : content) {
      if (part.is_object() && part.contains("text") && part["text"].is_string()) {
        n += part["text"].get_ref<const std::string&>().size();
      }
    }
  }
  return n;
}

// Shrinks an integer bound by `used` (>= 0), keeping it at least `floor`. The client's
// value may be anything an int64 holds: it is compared before subtracting, so no value
// overflows.
void Shrink(Json& body, const char* field, int64_t used, int64_t floor) {
  if (!body.contains(field) || !body[field].is_number_integer()) return;
  const int64_t value = body[field].get<int64_t>();
  body[field] = value <= floor || value - floor <= used ? floor : value - used;
}

}  // namespace

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<Json> ParseClientBody(std::string_view body) {
  if (JsonNestingExceeds(body, kMaxJsonDepth)) {
    return InvalidArgumentError("JSON decode error: nested deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {
    // Not only parse_error: a number out of double's range ("1e999") is out_of_range.
    return InvalidArgumentError(std::string("JSON decode error: ") + e.what());
  }
  if (!json.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  return json;
}

std::string PrefillBody(const Json& client_body) {
  Json body = client_body;
  body["kv_transfer_params"] = Json{{"do_remote_decode", true},    {"do_remote_prefill", false},
                                    {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                    {"remote_host", nullptr},      {"remote_port", nullptr}};
  body["stream"] = false;
  body["max_tokens"] = 1;
  if (body.contains("max_completion_tokens")) body["max_completion_tokens"] = 1;
  if (body.contains("min_tokens")) body["min_tokens"] = 1;
  body.erase("stream_options");
  return DumpJson(body);
}

std::string DecodeBody(std::string_view raw_body, const Json& client_body,
                       std::string_view kv_transfer_params) {
  if (kv_transfer_params.empty()) return std::string(raw_body);
  std::string base;
  if (client_body.contains("kv_transfer_params")) {
    Json copy = client_body;  // the client's own field gives way to P's
    copy.erase("kv_transfer_params");
    base = DumpJson(copy);
  } else {
    base = std::string(raw_body);
  }
  // Splice before the closing brace so that every other byte stays the client's.
  size_t close = base.find_last_of('}');
  size_t last = base.find_last_not_of(" \t\r\n", close == 0 ? 0 : close - 1);
  const bool empty_object = last != std::string::npos && base[last] == '{';
  std::string field = std::string(empty_object ? "" : ",") +
                      "\"kv_transfer_params\":" + std::string(kv_transfer_params);
  base.insert(close, field);
  return base;
}

int64_t EstimatePromptTokens(const Json& body) {
  int64_t tokens = 0;
  if (auto it = body.find("prompt"); it != body.end()) {
    const Json& prompt = *it;
    if (prompt.is_string()) {
      tokens = TextTokens(prompt.get_ref<const std::string&>().size());
    } else if (prompt.is_array()) {
      for (const Json& item : prompt) {
        if (item.is_number()) {
          ++tokens;  // one token-id prompt
        } else if (item.is_string()) {
          tokens += TextTokens(item.get_ref<const std::string&>().size());
        } else if (item.is_array()) {
          tokens += static_cast<int64_t>(item.size());
        }
      }
    }
  } else if (auto msgs = body.find("messages"); msgs != body.end() && msgs->is_array()) {
    size_t bytes = 0;
    for (const Json& message : *msgs) {
      if (message.is_object() && message.contains("content")) {
        bytes += ContentBytes(message["content"]);
      }
      bytes += 8;  // the template's role markers
    }
    tokens = TextTokens(bytes);
  }
  return std::max<int64_t>(1, tokens);
}

int64_t MaxNewTokens(const Json& body, int64_t fallback) {
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    if (auto it = body.find(field); it != body.end() && it->is_number_integer()) {
      return std::clamp<int64_t>(it->get<int64_t>(), 1, kMaxNewTokensEstimate);
    }
  }
  return fallback;
}

std::optional<Json> ContinuationBody(const Json& body, bool chat, std::string_view generated_text,
                                     int64_t generated_tokens) {
  Json next = body;
  if (chat) {
    if (!next.contains("messages") || !next["messages"].is_array()) return std::nullopt;
    Json& messages = next["messages"];
    // Typed checks, not Json::value(key, default): that throws for a value of another
    // type, and the body is the client's.
    auto continue_final = next.find("continue_final_message");
    const bool continuing =
        continue_final != next.end() && continue_final->is_boolean() &&
        continue_final->get<bool>() && !messages.empty() && messages.back().is_object() &&
        messages.back().contains("role") && messages.back()["role"] == "assistant" &&
        messages.back().contains("content") && messages.back()["content"].is_string();
    if (continuing) {
      messages.back()["content"] =
          messages.back()["content"].get<std::string>() + std::string(generated_text);
    } else {
      messages.push_back(Json{{"role", "assistant"}, {"content", std::string(generated_text)}});
    }
    next["continue_final_message"] = true;
    next["add_generation_prompt"] = false;
  } else {
    if (!next.contains("prompt")) return std::nullopt;
    Json& prompt = next["prompt"];
    if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
    if (!prompt.is_string()) return std::nullopt;
    prompt = prompt.get<std::string>() + std::string(generated_text);
    next.erase("echo");  // the continuation's echo would repeat the generated text
  }
  generated_tokens = std::max<int64_t>(0, generated_tokens);
  Shrink(next, "max_tokens", generated_tokens, 1);
  Shrink(next, "max_completion_tokens", generated_tokens, 1);
  Shrink(next, "min_tokens", generated_tokens, 0);
  return next;
}

}  // namespace tandem::proxy
