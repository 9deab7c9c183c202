// Tests for the glm45/glm47 tool-call parser. Every reply is also streamed in chunks
// of 1, 2, 3 and 7 bytes and split in two at every byte (ExtractEverySplit), and must
// give the non-streamed result.
#include "server/parsers/glm_tool_parser.h"

#include <gtest/gtest.h>

#include "server/parsers/parser_test_util.h"

namespace tandem::parsers {
namespace {

using testing::Args;
using testing::ExtractEverySplit;

const std::string kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "zip": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "set_config", "parameters": {
    "type": "object", "properties": {"ratio": {"type": "number"}, "enabled": {"type": "boolean"},
      "options": {"type": "object"}, "tags": {"type": "array"},
      "label": {"type": ["string", "null"]}}}}},
  {"type": "function", "function": {"name": "get_time"}}
])";

class GlmToolParserTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GlmToolParserTest, SeveralCallsWithTextBefore) {
  std::string text =
      "Let me check both cities.\n"
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n"
      "</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_TRUE(result.tools_called);
  EXPECT_EQ(result.content, "Let me check both cities.\n");
  ASSERT_EQ(result.tool_calls.size(), 2u);
  EXPECT_EQ(result.tool_calls[0].name, "get_weather");
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(result.tool_calls[1].arguments, R"({"city": "Zürich"})");
  EXPECT_NE(result.tool_calls[0].id, result.tool_calls[1].id);
  EXPECT_TRUE(result.tool_calls[0].id.starts_with("call_"));
}

TEST_P(GlmToolParserTest, Glm47LayoutWithoutNewlines) {
  std::string text =
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
      "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"
      "<tool_call>get_time</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_EQ(result.content, std::nullopt);
  ASSERT_EQ(result.tool_calls.size(), 2u);
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(result.tool_calls[1].name, "get_time");
  EXPECT_EQ(result.tool_calls[1].arguments, "{}");
}

TEST_P(GlmToolParserTest, CallWithoutArguments) {
  ExtractedToolCalls result =
      ExtractEverySplit(GetParam(), kTools, "<tool_call>get_time\n</tool_call>");
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.tool_calls[0].name, "get_time");
  EXPECT_EQ(result.tool_calls[0].arguments, "{}");
}

TEST_P(GlmToolParserTest, ValuesTypedBySchema) {
  std::string text =
      "<tool_call>set_config\n"
      "<arg_key>ratio</arg_key>\n<arg_value>0.75</arg_value>\n"
      "<arg_key>enabled</arg_key>\n<arg_value>true</arg_value>\n"
      "<arg_key>options</arg_key>\n<arg_value>{\"depth\": 2, \"mode\": \"fast\"}</arg_value>\n"
      "<arg_key>tags</arg_key>\n<arg_value>[1, \"two\", null]</arg_value>\n"
      "<arg_key>label</arg_key>\n<arg_value>12345</arg_value>\n"
      "<arg_key>unknown_number</arg_key>\n<arg_value>7</arg_value>\n"
      "<arg_key>unknown_text</arg_key>\n<arg_value>not json</arg_value>\n"
      "</tool_call>\n"
      "<tool_call>get_weather\n<arg_key>zip</arg_key>\n<arg_value>02139</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>10</arg_value>\n</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 2u);
  nlohmann::ordered_json config = Args(result.tool_calls[0]);
  EXPECT_TRUE(config["ratio"].is_number_float());
  EXPECT_DOUBLE_EQ(config["ratio"].get<double>(), 0.75);
  EXPECT_EQ(config["enabled"], true);
  EXPECT_EQ(config["options"]["depth"], 2);
  EXPECT_EQ(config["options"]["mode"], "fast");
  EXPECT_EQ(config["tags"], nlohmann::ordered_json::parse(R"([1, "two", null])"));
  EXPECT_EQ(config["label"], "12345");  // ["string", "null"] counts as string-typed
  EXPECT_EQ(config["unknown_number"], 7);
  EXPECT_EQ(config["unknown_text"], "not json");
  nlohmann::ordered_json weather = Args(result.tool_calls[1]);
  EXPECT_EQ(weather["zip"], "02139");  // string-typed: stays a string, keeps its zero
  EXPECT_TRUE(weather["days"].is_number_integer());
  EXPECT_EQ(result.tool_calls[1].arguments, R"({"zip": "02139", "days": 10})");
}

TEST_P(GlmToolParserTest, StringValuesAreEscaped) {
  std::string text =
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n"
      "<arg_value>line \"one\"\nline\ttwo \\ end</arg_value>\n</tool_call>";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(Args(result.tool_calls[0])["city"], "line \"one\"\nline\ttwo \\ end");
}

TEST_P(GlmToolParserTest, NoMarkupIsContent) {
  std::string text = "Plain answer with a < sign, <tool> and </tool_call> but no call.";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_TRUE(result.tool_calls.empty());
  EXPECT_EQ(result.content, text);
}

TEST_P(GlmToolParserTest, EmptyReply) {
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, "");
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, std::nullopt);
}

TEST_P(GlmToolParserTest, TextAfterCallsIsDropped) {
  std::string text = "<tool_call>get_time\n</tool_call>\nDone, calling it.";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.content, std::nullopt);
}

TEST_P(GlmToolParserTest, UnterminatedCallKeepsCompletePairs) {
  std::string text =
      "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_val";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_EQ(result.content, "Checking.");
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_EQ(result.tool_calls[0].arguments, R"({"city": "Paris"})");
}

TEST_P(GlmToolParserTest, UnterminatedNameIsRawContent) {
  std::string text = "Checking.<tool_call>get_wea";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, text);
}

TEST_P(GlmToolParserTest, PartialStartTagAtEndIsContent) {
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, "Almost <tool_ca");
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, "Almost <tool_ca");
}

TEST_P(GlmToolParserTest, ProseAfterStartTagIsContent) {
  std::string text = "About <tool_call><b>bold</b> text";
  ExtractedToolCalls result = ExtractEverySplit(GetParam(), kTools, text);
  EXPECT_FALSE(result.tools_called);
  EXPECT_EQ(result.content, text);
}

TEST_P(GlmToolParserTest, StreamsNameBeforeArguments) {
  StatusOr<std::unique_ptr<ToolParser>> parser = MakeToolParser(GetParam(), kTools);
  ASSERT_TRUE(parser.ok());
  ToolStreamDelta first = (*parser)->Feed("Hi <tool_call>get_weather\n<arg_key>ci");
  EXPECT_EQ(first.content, "Hi ");
  ASSERT_EQ(first.tool_calls.size(), 1u);
  EXPECT_EQ(first.tool_calls[0].name, "get_weather");
  EXPECT_EQ(first.tool_calls[0].arguments, "");
  ToolStreamDelta second = (*parser)->Feed("ty</arg_key><arg_value>Paris</arg_value>");
  ASSERT_EQ(second.tool_calls.size(), 1u);
  EXPECT_EQ(second.tool_calls[0].arguments, R"({"city": "Paris")");
  EXPECT_FALSE(second.tool_calls[0].name.has_value());
  ToolStreamDelta third = (*parser)->Feed("</tool_call>");
  ASSERT_EQ(third.tool_calls.size(), 1u);
  EXPECT_EQ(third.tool_calls[0].arguments, "}");
  EXPECT_TRUE((*parser)->Finish().empty());
}

INSTANTIATE_TEST_SUITE_P(Formats, GlmToolParserTest, ::testing::Values("glm45", "glm47"));

TEST(ToolParserFactoryTest, UnknownNameListsSupported) {
  StatusOr<std::unique_ptr<ToolParser>> parser = MakeToolParser("mistral", "");
  ASSERT_FALSE(parser.ok());
  EXPECT_EQ(parser.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parser.status().message().find("glm45, glm47, hermes"), std::string::npos);
}

TEST(ToolParserFactoryTest, MalformedToolsRejected) {
  EXPECT_FALSE(MakeToolParser("glm45", "{not json").ok());
  EXPECT_FALSE(MakeToolParser("glm45", R"({"type": "function"})").ok());
  EXPECT_TRUE(MakeToolParser("glm45", "[]").ok());
  EXPECT_TRUE(MakeToolParser("glm45", "").ok());
}

}  // namespace
}  // namespace tandem::parsers
