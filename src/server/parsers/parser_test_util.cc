#include "server/parsers/parser_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "server/parsers/tool_parser.h"

namespace tandem::parsers::testing {

std::vector<std::string_view> Chunks(std::string_view text, size_t chunk) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size(); pos += chunk) pieces.push_back(text.substr(pos, chunk));
  return pieces;
}

std::vector<std::string_view> SplitAt(std::string_view text, size_t split) {
  return {text.substr(0, split), text.substr(split)};
}

static std::unique_ptr<ToolParser> MakeOrDie(std::string_view name, const std::string& tools) {
  StatusOr<std::unique_ptr<ToolParser>> parser = MakeToolParser(name, tools);
  EXPECT_TRUE(parser.ok()) << parser.status().ToString();
  return std::move(parser).value();
}

ExtractedToolCalls ExtractWith(std::string_view parser_name, const std::string& tools_json,
                               std::string_view text) {
  return MakeOrDie(parser_name, tools_json)->ExtractToolCalls(text);
}

ExtractedToolCalls StreamWith(std::string_view parser_name, const std::string& tools_json,
                              const std::vector<std::string_view>& pieces) {
  std::unique_ptr<ToolParser> parser = MakeOrDie(parser_name, tools_json);
  ToolCallAccumulator accumulator;
  int calls_started = 0;
  auto check_and_add = [&](const ToolStreamDelta& delta) {
    for (const ToolCallDelta& piece : delta.tool_calls) {
      bool first = piece.index == calls_started;
      EXPECT_EQ(first, piece.id.has_value()) << "index " << piece.index;
      EXPECT_EQ(first, piece.name.has_value()) << "index " << piece.index;
      EXPECT_LE(piece.index, calls_started);
      if (first) {
        EXPECT_TRUE(piece.id->starts_with("call_")) << *piece.id;
        ++calls_started;
      }
    }
    accumulator.Add(delta);
  };
  for (std::string_view piece : pieces) check_and_add(parser->Feed(piece));
  check_and_add(parser->Finish());
  return accumulator.Result();
}

void ExpectSameCalls(const ExtractedToolCalls& expected, const ExtractedToolCalls& actual,
                     std::string_view context) {
  SCOPED_TRACE(std::string(context));
  EXPECT_EQ(expected.content, actual.content);
  EXPECT_EQ(expected.tools_called, actual.tools_called);
  ASSERT_EQ(expected.tool_calls.size(), actual.tool_calls.size());
  for (size_t i = 0; i < expected.tool_calls.size(); ++i) {
    EXPECT_EQ(expected.tool_calls[i].name, actual.tool_calls[i].name) << "call " << i;
    EXPECT_EQ(expected.tool_calls[i].arguments, actual.tool_calls[i].arguments) << "call " << i;
  }
}

ExtractedToolCalls ExtractEverySplit(std::string_view parser_name, const std::string& tools_json,
                                     std::string_view text) {
  ExtractedToolCalls expected = ExtractWith(parser_name, tools_json, text);
  RecordToolCalls(expected.tool_calls);
  for (size_t chunk : kChunkSizes) {
    ExtractedToolCalls streamed = StreamWith(parser_name, tools_json, Chunks(text, chunk));
    ExpectSameCalls(expected, streamed, "chunk size " + std::to_string(chunk));
    RecordToolCalls(streamed.tool_calls);
  }
  for (size_t split = 0; split <= text.size(); ++split) {
    ExpectSameCalls(expected, StreamWith(parser_name, tools_json, SplitAt(text, split)),
                    "split at " + std::to_string(split));
  }
  return expected;
}

nlohmann::ordered_json Args(const ToolCall& call) {
  nlohmann::ordered_json args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
  EXPECT_TRUE(args.is_object()) << call.arguments;
  return args;
}

void RecordToolCalls(const std::vector<ToolCall>& calls) {
  for (const ToolCall& call : calls) RecordToolCallJson(ToolCallToJson(call));
}

void RecordToolCallJson(const std::string& tool_call_json) {
  const char* path = std::getenv("TANDEM_TOOL_CALL_JSONL");
  if (path == nullptr || *path == '\0') return;
  std::ofstream file(path, std::ios::app);
  file << tool_call_json << '\n';
}

}  // namespace tandem::parsers::testing
