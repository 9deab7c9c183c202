#include "server/openai_response.h"

#include <cmath>

#include "server/json_fields.h"

namespace tandem::server {
namespace {

// JSON has no -inf; vLLM reports impossible tokens as -9999.0.
double SafeLogprob(float v) { return std::isfinite(v) ? static_cast<double>(v) : -9999.0; }

Json BytesOf(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json RawJson(const std::string& text) {
  if (text.empty()) return nullptr;
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? Json(nullptr) : value;
}

Json UsageJson(const UsageCounts& usage, bool include_cached) {
  Json j;
  j["prompt_tokens"] = usage.prompt_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["prompt_tokens_details"] =
      include_cached ? Json{{"cached_tokens", usage.cached_tokens}} : Json(nullptr);
  return j;
}

// The completions API's logprobs object; `text_offset` advances over the tokens.
Json CompletionLogprobs(const std::vector<TokenLogprob>& logprobs, const ResponseContext& ctx,
                        int64_t* text_offset) {
  Json offsets = Json::array(), values = Json::array(), tokens = Json::array(),
       tops = Json::array();
  for (const TokenLogprob& lp : logprobs) {
    std::string text = ctx.token_text(lp.token);
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(text.size());
    values.push_back(SafeLogprob(lp.logprob));
    Json top = Json::object();
    for (const auto& [id, value] : lp.top) {
      if (static_cast<int>(top.size()) >= ctx.logprobs) break;
      top[ctx.token_text(id)] = SafeLogprob(value);
    }
    if (!top.contains(text))
      top[text] = SafeLogprob(lp.logprob);  // the sampled token is always listed
    tokens.push_back(std::move(text));
    tops.push_back(std::move(top));
  }
  return Json{{"text_offset", offsets},
              {"token_logprobs", values},
              {"tokens", tokens},
              {"top_logprobs", tops}};
}

// The chat API's logprobs object.
Json ChatLogprobs(const std::vector<TokenLogprob>& logprobs, const ResponseContext& ctx) {
  Json content = Json::array();
  for (const TokenLogprob& lp : logprobs) {
    std::string text = ctx.token_text(lp.token);
    Json top = Json::array();
    for (const auto& [id, value] : lp.top) {
      if (static_cast<int>(top.size()) >= ctx.logprobs) break;
      std::string t = ctx.token_text(id);
      top.push_back(Json{{"token", t}, {"logprob", SafeLogprob(value)}, {"bytes", BytesOf(t)}});
    }
    content.push_back(Json{{"token", text},
                           {"logprob", SafeLogprob(lp.logprob)},
                           {"bytes", BytesOf(text)},
                           {"top_logprobs", std::move(top)}});
  }
  return Json{{"content", std::move(content)}};
}

Json Envelope(const ResponseContext& ctx, const char* object) {
  Json j;
  j["id"] = ctx.id;
  j["object"] = object;
  j["created"] = ctx.created;
  j["model"] = ctx.model;
  return j;
}

}  // namespace

std::string StopReasonJson(const RequestOutput& output, const GenerationParams& params) {
  if (output.finish_reason != "stop" || output.stop_reason.empty()) return "null";
  // The recompute scheduler's hand-back (engine.h, recompute_scheduler); the proxy re-routes.
  if (output.stop_reason == "recomputed") return DumpJson(Json(output.stop_reason));
  for (const std::string& s : params.stop) {
    if (s == output.stop_reason) return DumpJson(Json(s));
  }
  for (int32_t id : params.stop_token_ids) {
    if (std::to_string(id) == output.stop_reason) return std::to_string(id);
  }
  // An end-of-sequence token: vLLM reports null.
  return "null";
}

std::string MergeChoices(const std::vector<std::string>& responses) {
  Json merged = Json::parse(responses.front());
  for (size_t i = 1; i < responses.size(); ++i) {
    const Json response = Json::parse(responses[i]);
    for (const Json& choice : response["choices"]) merged["choices"].push_back(choice);
  }
  return DumpJson(merged);
}

ResponseFormatter::ResponseFormatter(ResponseContext context,
                                     std::unique_ptr<parsers::ChatOutputParser> output_parser)
    : context_(std::move(context)), output_parser_(std::move(output_parser)) {
  if (!context_.token_text) context_.token_text = [](int32_t id) { return std::to_string(id); };
}

std::string ResponseFormatter::ChatFinishReason(const std::string& reason) const {
  // "length" stays: a call cut by max_tokens may be incomplete, and the client should know.
  if (output_parser_ != nullptr && output_parser_->message().tools_called() && reason != "length")
    return "tool_calls";
  return reason;
}

std::vector<std::string> ResponseFormatter::ParsedStreamChunks(const RequestOutput& output,
                                                               const std::string& stop_reason_json,
                                                               const UsageCounts* usage) {
  std::vector<std::string> deltas = output_parser_->Feed(output.new_text);
  if (output.finished) {
    std::vector<std::string> rest = output_parser_->Finish();
    deltas.insert(deltas.end(), rest.begin(), rest.end());
  }
  const bool has_logprobs = context_.logprobs >= 0 && !output.new_logprobs.empty();
  std::vector<std::string> payloads;
  // Text held back by the parser still owes the client its logprobs and the final
  // chunk its finish_reason: an empty delta carries them.
  if (deltas.empty() && (has_logprobs || output.finished)) deltas.push_back("{}");
  for (size_t i = 0; i < deltas.size(); ++i) {
    const bool last = output.finished && i + 1 == deltas.size();
    Json choice;
    choice["index"] = context_.index;
    choice["delta"] = Json::parse(deltas[i]);
    choice["logprobs"] =
        i == 0 && has_logprobs ? ChatLogprobs(output.new_logprobs, context_) : Json(nullptr);
    choice["finish_reason"] = last ? Json(ChatFinishReason(output.finish_reason)) : Json(nullptr);
    choice["stop_reason"] = last ? RawJson(stop_reason_json) : Json(nullptr);
    Json j = Envelope(context_, "chat.completion.chunk");
    j["choices"] = Json::array({std::move(choice)});
    if (usage != nullptr) j["usage"] = UsageJson(*usage, context_.include_cached_tokens);
    payloads.push_back(DumpJson(j));
  }
  return payloads;
}

std::vector<std::string> ResponseFormatter::StreamChunks(const RequestOutput& output,
                                                         const std::string& stop_reason_json,
                                                         const UsageCounts* usage) {
  std::vector<std::string> payloads;
  const bool chat = context_.kind == ApiKind::kChat;
  const bool has_logprobs = context_.logprobs >= 0 && !output.new_logprobs.empty();
  const char* object = chat ? "chat.completion.chunk" : "text_completion";
  auto add_usage = [&](Json& j) {
    if (usage != nullptr) j["usage"] = UsageJson(*usage, context_.include_cached_tokens);
  };
  if (chat && !sent_role_) {
    sent_role_ = true;
    Json j = Envelope(context_, object);
    j["choices"] = Json::array({Json{{"index", context_.index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    add_usage(j);
    payloads.push_back(DumpJson(j));
  }
  if (chat && output_parser_ != nullptr) {
    std::vector<std::string> parsed = ParsedStreamChunks(output, stop_reason_json, usage);
    payloads.insert(payloads.end(), parsed.begin(), parsed.end());
    return payloads;
  }
  if (output.new_text.empty() && !has_logprobs && !output.finished) return payloads;

  Json choice;
  choice["index"] = context_.index;
  if (chat) {
    choice["delta"] = output.new_text.empty() && output.finished
                          ? Json::object()
                          : Json{{"content", output.new_text}};
    choice["logprobs"] = has_logprobs ? ChatLogprobs(output.new_logprobs, context_) : Json(nullptr);
  } else {
    choice["text"] = output.new_text;
    choice["logprobs"] = has_logprobs
                             ? CompletionLogprobs(output.new_logprobs, context_, &text_offset_)
                             : Json(nullptr);
  }
  choice["finish_reason"] = output.finished ? Json(output.finish_reason) : Json(nullptr);
  choice["stop_reason"] = output.finished ? RawJson(stop_reason_json) : Json(nullptr);
  Json j = Envelope(context_, object);
  j["choices"] = Json::array({std::move(choice)});
  add_usage(j);
  payloads.push_back(DumpJson(j));
  return payloads;
}

std::string ResponseFormatter::UsageChunk(const UsageCounts& usage) const {
  Json j = Envelope(context_,
                    context_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage, context_.include_cached_tokens);
  return DumpJson(j);
}

void ResponseFormatter::Append(const RequestOutput& output) {
  if (output_parser_ != nullptr) {
    output_parser_->Feed(output.new_text);  // the deltas are for streams; the message folds
    if (output.finished) output_parser_->Finish();
  }
  text_ += output.new_text;
  tokens_.insert(tokens_.end(), output.new_tokens.begin(), output.new_tokens.end());
  if (context_.logprobs >= 0) {
    logprobs_.insert(logprobs_.end(), output.new_logprobs.begin(), output.new_logprobs.end());
  }
}

std::string ResponseFormatter::FinalResponse(const std::string& finish_reason,
                                             const std::string& stop_reason_json,
                                             const UsageCounts& usage,
                                             const std::string& kv_transfer_params_json) const {
  const bool chat = context_.kind == ApiKind::kChat;
  Json choice;
  choice["index"] = context_.index;
  if (chat) {
    if (output_parser_ != nullptr) {
      const Json parsed = Json::parse(output_parser_->MessageJson());
      choice["message"] =
          Json{{"role", "assistant"},
               {"content", parsed.value("content", Json(nullptr))},
               {"reasoning_content", parsed.value("reasoning_content", Json(nullptr))},
               {"tool_calls", parsed.value("tool_calls", Json::array())}};
    } else {
      choice["message"] = Json{{"role", "assistant"},
                               {"content", text_},
                               {"reasoning_content", nullptr},
                               {"tool_calls", Json::array()}};
    }
    choice["logprobs"] = context_.logprobs >= 0 ? ChatLogprobs(logprobs_, context_) : Json(nullptr);
  } else {
    choice["text"] = text_;
    int64_t offset = 0;
    choice["logprobs"] =
        context_.logprobs >= 0 ? CompletionLogprobs(logprobs_, context_, &offset) : Json(nullptr);
  }
  choice["finish_reason"] = finish_reason.empty() ? Json(nullptr)
                            : chat                ? Json(ChatFinishReason(finish_reason))
                                                  : Json(finish_reason);
  choice["stop_reason"] = RawJson(stop_reason_json);
  if (!chat) choice["prompt_logprobs"] = nullptr;
  Json j = Envelope(context_, chat ? "chat.completion" : "text_completion");
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = UsageJson(usage, context_.include_cached_tokens);
  if (chat) j["prompt_logprobs"] = nullptr;
  j["kv_transfer_params"] = RawJson(kv_transfer_params_json);
  return DumpJson(j);
}

}  // namespace tandem::server
