#include "server/parsers/tool_parser.h"

#include "server/parsers/glm_tool_parser.h"
#include "server/parsers/hermes_tool_parser.h"
#include "server/parsers/parser_text.h"
#include "server/parsers/tool_schema.h"

namespace tandem::parsers {

ExtractedToolCalls ToolParser::ExtractToolCalls(std::string_view full_text) {
  ToolCallAccumulator accumulator;
  accumulator.Add(Feed(full_text));
  accumulator.Add(Finish());
  return accumulator.Result();
}

bool ToolParser::ConsumeContent(ToolStreamDelta& out) {
  TagSearch start = FindTag(buffer_, kCallStart);
  if (start.pos == std::string_view::npos) {
    EmitContent(buffer_, out);
    buffer_.clear();
    return false;
  }
  EmitContent(std::string_view(buffer_).substr(0, start.pos), out);
  if (!start.complete) {  // hold the partial tag until the next chunk decides
    buffer_.erase(0, start.pos);
    return false;
  }
  buffer_.erase(0, start.pos + kCallStart.size());
  return true;
}

void ToolParser::EmitContent(std::string_view text, ToolStreamDelta& out) const {
  if (num_calls_ == 0) out.content.append(text);
}

void ToolParser::AbandonCall(size_t n, ToolStreamDelta& out) {
  EmitContent(kCallStart, out);
  EmitContent(std::string_view(buffer_).substr(0, n), out);
  buffer_.erase(0, n);
}

void ToolParser::BeginCall(std::string name, ToolStreamDelta& out) {
  ToolCallDelta header;
  header.index = num_calls_++;
  header.id = NewToolCallId();
  header.name = std::move(name);
  out.tool_calls.push_back(std::move(header));
}

void ToolParser::EmitArguments(std::string piece, ToolStreamDelta& out) const {
  ToolCallDelta delta;
  delta.index = num_calls_ - 1;
  delta.arguments = std::move(piece);
  out.tool_calls.push_back(std::move(delta));
}

StatusOr<std::unique_ptr<ToolParser>> MakeToolParser(std::string_view name,
                                                     std::string tools_json) {
  if (name != "glm45" && name != "glm47" && name != "hermes") {
    return InvalidArgumentError("unknown tool call parser \"" + std::string(name) +
                                "\"; supported: glm45, glm47, hermes");
  }
  TANDEM_ASSIGN_OR_RETURN(ToolSchema schema, ToolSchema::Parse(tools_json));
  if (name == "hermes") {
    return std::unique_ptr<ToolParser>(std::make_unique<HermesToolParser>());
  }
  return std::unique_ptr<ToolParser>(std::make_unique<GlmToolParser>(std::move(schema)));
}

}  // namespace tandem::parsers
