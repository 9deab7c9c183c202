// Tests for the hermes (Qwen) tool-call parser; every reply is also streamed at every
// split (ExtractEverySplit) and must give the non-streamed result.
#include "server/parsers/hermes_tool_parser.h"

#include <gtest/gtest.h>

#include "server/parsers/parser_test_util.h"

namespace tandem::parsers {
namespace {

using testing::Args;
using testing::ExtractEverySplit;

const std::string kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}}}
])";

TEST(HermesToolParserTest, SeveralCallsWithTextBefore) {
  std::string text =
      "I'll look that up.\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\"}}\n</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  EXPECT_EQ(result.content, "I'll look that up.\n");
  ASSERT_EQ(result.tool_calls.size(), 2u);
  EXPECT_EQ(result.tool_calls[0].name, "get_weather");
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(result.tool_calls[1].arguments, R"({"city": "東京"})");
}

TEST(HermesToolParserTest, CallWithoutArguments) {
  std::string text =
      "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"get_date\"}</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 2u);
  EXPECT_EQ(result.tool_calls[0].arguments, "{}");
  EXPECT_EQ(result.tool_calls[1].name, "get_date");
  EXPECT_EQ(result.tool_calls[1].arguments, "{}");
}

TEST(HermesToolParserTest, TypedValuesKeptAsWritten) {
  std::string text =
      "<tool_call>\n{\"name\": \"set_config\", \"arguments\": {\"count\": 3, \"ratio\": 0.5, "
      "\"enabled\": false, \"options\": {\"a\": [1, 2]}, \"tags\": [\"x\"], \"zip\": "
      "\"02139\"}}\n</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.tool_calls[0].arguments,
            R"({"count": 3, "ratio": 0.5, "enabled": false, "options": {"a": [1, 2]}, )"
            R"("tags": ["x"], "zip": "02139"})");
  nlohmann::ordered_json args = Args(result.tool_calls[0]);
  EXPECT_TRUE(args["count"].is_number_integer());
  EXPECT_TRUE(args["ratio"].is_number_float());
  EXPECT_EQ(args["zip"], "02139");
}

TEST(HermesToolParserTest, DoubleEncodedArguments) {
  std::string text =
      R"(<tool_call>{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}</tool_call>)";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Paris"})");
}

TEST(HermesToolParserTest, InvalidJsonIsRawContent) {
  std::string text = "Try: <tool_call>{\"name\": get_weather}</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, text);
}

TEST(HermesToolParserTest, NoMarkupIsContent) {
  std::string text = "The answer is 42. {\"name\": \"not a call\"}";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, text);
}

TEST(HermesToolParserTest, UnterminatedValidJsonIsACall) {
  // max_tokens cut the closing tag only: parsed like vLLM's `<tool_call>(.*)` fallback.
  std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Oslo"})");
}

TEST(HermesToolParserTest, UnterminatedPartialJsonIsRawContent) {
  std::string text = "Sure.<tool_call>\n{\"name\": \"get_weather\", \"argum";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, text);
}

TEST(HermesToolParserTest, TextAfterCallsIsDropped) {
  std::string text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\nbye";
  ExtractedToolCalls result = ExtractEverySplit("hermes", kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.content, std::nullopt);
}

}  // namespace
}  // namespace tandem::parsers
