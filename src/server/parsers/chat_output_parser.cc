#include "server/parsers/chat_output_parser.h"

#include <nlohmann/json.hpp>

#include "server/parsers/parser_text.h"

namespace tandem::parsers {

namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json ToolCallJson(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

StatusOr<std::unique_ptr<ChatOutputParser>> ChatOutputParser::Create(
    const ChatOutputConfig& config) {
  std::unique_ptr<ToolParser> tools;
  std::unique_ptr<ReasoningParser> reasoning;
  if (!config.tool_parser.empty()) {
    TANDEM_ASSIGN_OR_RETURN(tools, MakeToolParser(config.tool_parser, config.tools_json));
  }
  if (!config.reasoning_parser.empty()) {
    TANDEM_ASSIGN_OR_RETURN(reasoning,
                            MakeReasoningParser(config.reasoning_parser, config.enable_thinking));
  }
  return std::unique_ptr<ChatOutputParser>(
      new ChatOutputParser(std::move(tools), std::move(reasoning)));
}

std::vector<std::string> ChatOutputParser::Feed(std::string_view delta_text) {
  std::vector<std::string> out;
  utf8_pending_.append(delta_text);
  size_t held = IncompleteUtf8Suffix(utf8_pending_);
  std::string text = utf8_pending_.substr(0, utf8_pending_.size() - held);
  utf8_pending_.erase(0, utf8_pending_.size() - held);
  if (text.empty()) return out;
  if (reasoning_) {
    Route(reasoning_->Feed(text), out);
  } else {
    Route(ReasoningDelta{"", std::move(text)}, out);
  }
  return out;
}

std::vector<std::string> ChatOutputParser::Finish() {
  std::vector<std::string> out;
  // A character cut off by max_tokens is passed on; JSON output replaces it with U+FFFD.
  std::string text = std::move(utf8_pending_);
  utf8_pending_.clear();
  if (reasoning_) {
    ReasoningDelta split = reasoning_->Feed(text);
    ReasoningDelta tail = reasoning_->Finish();
    split.reasoning += tail.reasoning;
    split.content += tail.content;
    Route(split, out);
  } else if (!text.empty()) {
    Route(ReasoningDelta{"", std::move(text)}, out);
  }
  if (tools_) EmitTools(tools_->Finish(), out);
  return out;
}

void ChatOutputParser::Route(const ReasoningDelta& split, std::vector<std::string>& out) {
  if (!split.reasoning.empty()) {
    reasoning_content_ += split.reasoning;
    message_.reasoning_content = reasoning_content_;
    out.push_back(Dump({{"reasoning_content", split.reasoning}}));
  }
  if (split.content.empty()) return;
  if (tools_) {
    EmitTools(tools_->Feed(split.content), out);
  } else {
    EmitContent(split.content, out);
  }
}

void ChatOutputParser::EmitContent(const std::string& text, std::vector<std::string>& out) {
  if (text.empty()) return;
  content_ += text;
  message_.content = content_;
  out.push_back(Dump({{"content", text}}));
}

void ChatOutputParser::EmitTools(const ToolStreamDelta& delta, std::vector<std::string>& out) {
  EmitContent(delta.content, out);
  if (delta.tool_calls.empty()) return;
  calls_.Add(ToolStreamDelta{"", delta.tool_calls});
  message_.tool_calls = calls_.Result().tool_calls;
  for (const ToolCallDelta& piece : delta.tool_calls) {
    out.push_back("{\"tool_calls\": [" + ToolCallDeltaToJson(piece) + "]}");
  }
}

std::string ChatOutputParser::MessageJson() const {
  json message = {{"role", "assistant"}};
  message["content"] = message_.content ? json(*message_.content) : json(nullptr);
  if (message_.reasoning_content) message["reasoning_content"] = *message_.reasoning_content;
  if (message_.tools_called()) {
    json calls = json::array();
    for (const ToolCall& call : message_.tool_calls) calls.push_back(ToolCallJson(call));
    message["tool_calls"] = std::move(calls);
  }
  return Dump(message);
}

}  // namespace tandem::parsers
