#include "server/parsers/hermes_tool_parser.h"

#include <nlohmann/json.hpp>

#include "server/parsers/parser_text.h"

namespace tandem::parsers {

ToolStreamDelta HermesToolParser::Feed(std::string_view delta_text) {
  buffer_.append(delta_text);
  ToolStreamDelta out;
  while (true) {
    if (!in_call_) {
      if (!ConsumeContent(out)) break;
      in_call_ = true;
    }
    size_t end = std::string_view(buffer_).find(kCallEnd);
    if (end == std::string_view::npos) break;  // hold the body until it closes
    if (!EmitCall(std::string_view(buffer_).substr(0, end), out)) {
      AbandonCall(end + kCallEnd.size(), out);
    } else {
      buffer_.erase(0, end + kCallEnd.size());
    }
    in_call_ = false;
  }
  return out;
}

ToolStreamDelta HermesToolParser::Finish() {
  ToolStreamDelta out;
  if (!in_call_) {
    EmitContent(buffer_, out);
  } else if (!EmitCall(buffer_, out)) {
    AbandonCall(buffer_.size(), out);
  }
  buffer_.clear();
  in_call_ = false;
  return out;
}

bool HermesToolParser::EmitCall(std::string_view body, ToolStreamDelta& out) {
  std::optional<Json> call = ParseJson(StripWhitespace(body));
  if (!call || !call->is_object()) return false;
  auto name = call->find("name");
  if (name == call->end() || !name->is_string()) return false;
  std::string arguments = "{}";
  auto args = call->find("arguments");
  if (args != call->end() && !args->is_null()) {
    std::optional<Json> object = *args;
    // Some models double-encode: "arguments": "{\"city\": \"Paris\"}".
    if (args->is_string()) object = ParseJson(args->get<std::string>());
    if (!object || !object->is_object()) return false;
    arguments = SerializeJson(*object);
  }
  BeginCall(name->get<std::string>(), out);
  EmitArguments(std::move(arguments), out);
  return true;
}

}  // namespace tandem::parsers
