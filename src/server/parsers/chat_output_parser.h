// ChatOutputParser: the one object the OpenAI server needs to turn a chat reply into
// `reasoning_content`, `content` and `tool_calls`, streamed or not.
//
// Reasoning runs first; the tool parser then runs on the content part only, so a
// `<tool_call>` inside <think>...</think> is reasoning text, not a call.
//
//   ChatOutputConfig config{.tool_parser = "glm45", .reasoning_parser = "glm45",
//                           .enable_thinking = true, .tools_json = tools};
//   TANDEM_ASSIGN_OR_RETURN(auto parser, ChatOutputParser::Create(config));
//   // streaming: per detokenized chunk
//   for (const std::string& delta : parser->Feed(text)) SendChunk(delta);
//   for (const std::string& delta : parser->Finish()) SendChunk(delta);
//   finish_reason = parser->message().tools_called() ? "tool_calls" : reason;
//   // non-streaming: Feed(all); Finish(); then parser->MessageJson().
//
// Each returned string is one OpenAI `choices[i].delta` object (the server adds
// "role" to the first chunk):
//   {"reasoning_content": "..."}   {"content": "..."}
//   {"tool_calls": [{"index": 0, "id": "call_...", "type": "function",
//                    "function": {"name": "f", "arguments": ""}}]}
//   {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Paris\""}}]}
// Feed may return none (text held back: a split tag, an incomplete UTF-8 character).
//
// The server should pass an empty tool_parser when the request has no tools or
// tool_choice is "none", so that a plain reply is never parsed for calls.
//
// Thread safety: one reply's state; not thread-safe; one parser per request.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/parsers/reasoning_parser.h"
#include "server/parsers/tool_call.h"
#include "server/parsers/tool_parser.h"

namespace tandem::parsers {

struct ChatOutputConfig {
  std::string tool_parser;       // "glm45", "glm47", "hermes", or "" for none
  std::string reasoning_parser;  // "glm45", "qwen3", "deepseek_r1", or "" for none
  bool enable_thinking = true;   // chat_template_kwargs.enable_thinking
  std::string tools_json;        // the request's `tools` array, or ""
};

// The reply folded so far (complete after Finish).
struct ChatOutputMessage {
  std::optional<std::string> content;            // nullopt when empty
  std::optional<std::string> reasoning_content;  // nullopt when empty
  std::vector<ToolCall> tool_calls;

  bool tools_called() const { return !tool_calls.empty(); }
};

class ChatOutputParser {
 public:
  // InvalidArgument for an unknown parser name or a malformed tools_json.
  static StatusOr<std::unique_ptr<ChatOutputParser>> Create(const ChatOutputConfig& config);

  // Consumes the next piece of reply text; returns zero or more delta JSON objects.
  // Precondition: Finish() not called yet.
  std::vector<std::string> Feed(std::string_view delta_text);
  // End of the reply: flushes held text. Precondition: called once, after the last Feed.
  std::vector<std::string> Finish();

  const ChatOutputMessage& message() const { return message_; }
  // The non-streamed `choices[i].message` object: {"role": "assistant", "content": ...
  // or null, "reasoning_content": ... (when any), "tool_calls": [...] (when any)}.
  std::string MessageJson() const;

 private:
  ChatOutputParser(std::unique_ptr<ToolParser> tools, std::unique_ptr<ReasoningParser> reasoning)
      : tools_(std::move(tools)), reasoning_(std::move(reasoning)) {}

  // Routes text already split by the reasoning parser; appends deltas to `out`.
  void Route(const ReasoningDelta& split, std::vector<std::string>& out);
  void EmitContent(const std::string& text, std::vector<std::string>& out);
  void EmitTools(const ToolStreamDelta& delta, std::vector<std::string>& out);

  std::unique_ptr<ToolParser> tools_;           // null: no tool parsing
  std::unique_ptr<ReasoningParser> reasoning_;  // null: no reasoning parsing
  std::string utf8_pending_;                    // an incomplete UTF-8 character from the last chunk
  std::string content_;
  std::string reasoning_content_;
  ToolCallAccumulator calls_;
  ChatOutputMessage message_;
};

}  // namespace tandem::parsers
