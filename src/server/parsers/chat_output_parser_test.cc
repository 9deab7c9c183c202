// Tests for ChatOutputParser: reasoning and tool calls together, and the OpenAI delta
// JSON it streams, reassembled and compared with the non-streamed message.
#include "server/parsers/chat_output_parser.h"

#include <gtest/gtest.h>

#include "server/parsers/parser_test_util.h"

namespace tandem::parsers {
namespace {

using Json = nlohmann::json;  // key order does not matter when comparing messages

const std::string kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "days": {"type": "integer"}}}}}])";

std::unique_ptr<ChatOutputParser> Make(const ChatOutputConfig& config) {
  StatusOr<std::unique_ptr<ChatOutputParser>> parser = ChatOutputParser::Create(config);
  EXPECT_TRUE(parser.ok()) << parser.status().ToString();
  return std::move(parser).value();
}

// The non-streamed message: Feed(all) + Finish().
Json Complete(const ChatOutputConfig& config, std::string_view text) {
  std::unique_ptr<ChatOutputParser> parser = Make(config);
  parser->Feed(text);
  parser->Finish();
  Json message = Json::parse(parser->MessageJson());
  for (const Json& call : message.value("tool_calls", Json::array())) {
    testing::RecordToolCallJson(call.dump());
  }
  return message;
}

// Streams `pieces` and rebuilds the message from the delta JSON objects alone, the way
// an OpenAI client does.
Json Reassemble(const ChatOutputConfig& config, const std::vector<std::string_view>& pieces) {
  std::unique_ptr<ChatOutputParser> parser = Make(config);
  std::vector<std::string> deltas;
  for (std::string_view piece : pieces) {
    for (std::string& delta : parser->Feed(piece)) deltas.push_back(std::move(delta));
  }
  for (std::string& delta : parser->Finish()) deltas.push_back(std::move(delta));
  std::string content, reasoning;
  Json calls = Json::array();
  for (const std::string& text : deltas) {
    Json delta = Json::parse(text, nullptr, false);
    EXPECT_TRUE(delta.is_object()) << text;
    EXPECT_EQ(delta.size(), 1u) << text;
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) {
      reasoning += delta["reasoning_content"].get<std::string>();
    }
    for (const Json& piece : delta.value("tool_calls", Json::array())) {
      size_t index = piece["index"].get<size_t>();
      if (index == calls.size()) {
        EXPECT_EQ(piece["type"], "function") << text;
        EXPECT_TRUE(piece["function"].contains("name")) << text;
        calls.push_back({{"id", piece["id"]},
                         {"type", "function"},
                         {"function", {{"name", piece["function"]["name"]}, {"arguments", ""}}}});
      } else {
        EXPECT_FALSE(piece.contains("id")) << text;
      }
      std::string args = calls[index]["function"]["arguments"].get<std::string>();
      calls[index]["function"]["arguments"] =
          args + piece["function"]["arguments"].get<std::string>();
    }
  }
  Json message = {{"role", "assistant"}};
  message["content"] = content.empty() ? Json(nullptr) : Json(content);
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) message["tool_calls"] = calls;
  for (const Json& call : calls) testing::RecordToolCallJson(call.dump());
  return message;
}

// Drops the random ids so two messages compare by content.
Json WithoutIds(Json message) {
  if (message.contains("tool_calls")) {
    for (Json& call : message["tool_calls"]) call.erase("id");
  }
  return message;
}

Json CheckEverySplit(const ChatOutputConfig& config, std::string_view text) {
  Json expected = Complete(config, text);
  for (size_t chunk : testing::kChunkSizes) {
    EXPECT_EQ(WithoutIds(expected), WithoutIds(Reassemble(config, testing::Chunks(text, chunk))))
        << "chunk " << chunk;
  }
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(WithoutIds(expected), WithoutIds(Reassemble(config, testing::SplitAt(text, split))))
        << "split " << split;
  }
  return expected;
}

const std::string kGlmReply =
    "<think>The user wants weather; call the tool.</think>\n"
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>";

TEST(ChatOutputParserTest, ReasoningThenToolCall) {
  Json message = CheckEverySplit({"glm45", "glm45", true, kTools}, kGlmReply);
  EXPECT_EQ(message["reasoning_content"], "The user wants weather; call the tool.");
  EXPECT_EQ(message["content"], "\n");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris", "days": 2})");
}

TEST(ChatOutputParserTest, ToolCallInsideThinkingIsReasoning) {
  std::string text = "<think>maybe <tool_call>get_time</tool_call>?</think>No call needed.";
  Json message = CheckEverySplit({"glm47", "glm45", true, kTools}, text);
  EXPECT_EQ(message["reasoning_content"], "maybe <tool_call>get_time</tool_call>?");
  EXPECT_EQ(message["content"], "No call needed.");
  EXPECT_FALSE(message.contains("tool_calls"));
}

TEST(ChatOutputParserTest, ThinkingDisabledStillParsesCalls) {
  std::string text =
      "Calling.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></"
      "tool_call>";
  Json message = CheckEverySplit({"glm47", "glm45", false, kTools}, text);
  EXPECT_FALSE(message.contains("reasoning_content"));
  EXPECT_EQ(message["content"], "Calling.");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Rome"})");
}

TEST(ChatOutputParserTest, HermesWithQwen3Reasoning) {
  std::string text =
      "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Lyon\", \"days\": 1}}\n</tool_call>";
  Json message = CheckEverySplit({"hermes", "qwen3", true, kTools}, text);
  EXPECT_EQ(message["reasoning_content"], "\nNeed weather.\n");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Lyon", "days": 1})");
}

TEST(ChatOutputParserTest, NoParsersPassContentThrough) {
  std::string text = "<think>kept</think> <tool_call>kept too</tool_call> héllo";
  Json message = CheckEverySplit({"", "", true, ""}, text);
  EXPECT_EQ(message["content"], text);
  EXPECT_FALSE(message.contains("tool_calls"));
}

TEST(ChatOutputParserTest, MultibyteCharactersNeverSplitInDeltas) {
  std::unique_ptr<ChatOutputParser> parser = Make({"glm45", "deepseek_r1", true, kTools});
  std::string text = "思考中</think>答案: 東京";
  std::string content, reasoning;
  for (std::string_view piece : testing::Chunks(text, 1)) {
    for (const std::string& delta : parser->Feed(piece)) {
      EXPECT_EQ(delta.find("\xEF\xBF\xBD"), std::string::npos) << delta;  // U+FFFD
      Json json = Json::parse(delta);
      content += json.value("content", "");
      reasoning += json.value("reasoning_content", "");
    }
  }
  EXPECT_TRUE(parser->Finish().empty());
  EXPECT_EQ(reasoning, "思考中");
  EXPECT_EQ(content, "答案: 東京");
}

TEST(ChatOutputParserTest, UnknownNamesRejected) {
  EXPECT_FALSE(ChatOutputParser::Create({"nope", "", true, ""}).ok());
  EXPECT_FALSE(ChatOutputParser::Create({"", "nope", true, ""}).ok());
  EXPECT_FALSE(ChatOutputParser::Create({"glm45", "", true, "{"}).ok());
}

}  // namespace
}  // namespace tandem::parsers
