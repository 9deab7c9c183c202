// Tests for the <think> reasoning parsers; each reply is also streamed in chunks of
// 1, 2, 3 and 7 bytes and split at every byte, and must give the non-streamed result.
#include "server/parsers/reasoning_parser.h"

#include <gtest/gtest.h>

#include "server/parsers/parser_test_util.h"

namespace tandem::parsers {
namespace {

std::unique_ptr<ReasoningParser> Make(std::string_view name, bool enable_thinking) {
  StatusOr<std::unique_ptr<ReasoningParser>> parser = MakeReasoningParser(name, enable_thinking);
  EXPECT_TRUE(parser.ok()) << parser.status().ToString();
  return std::move(parser).value();
}

ExtractedReasoning Stream(std::string_view name, bool enable_thinking,
                          const std::vector<std::string_view>& pieces) {
  std::unique_ptr<ReasoningParser> parser = Make(name, enable_thinking);
  std::string reasoning, content;
  auto add = [&](const ReasoningDelta& delta) {
    reasoning += delta.reasoning;
    content += delta.content;
  };
  for (std::string_view piece : pieces) add(parser->Feed(piece));
  add(parser->Finish());
  ExtractedReasoning result;
  if (!reasoning.empty()) result.reasoning = reasoning;
  if (!content.empty()) result.content = content;
  return result;
}

// Non-streamed result, checked against every streamed split.
ExtractedReasoning ExtractEverySplit(std::string_view name, bool enable_thinking,
                                     std::string_view text) {
  ExtractedReasoning expected = Make(name, enable_thinking)->Extract(text);
  for (size_t chunk : testing::kChunkSizes) {
    ExtractedReasoning streamed = Stream(name, enable_thinking, testing::Chunks(text, chunk));
    EXPECT_EQ(expected.reasoning, streamed.reasoning) << "chunk " << chunk;
    EXPECT_EQ(expected.content, streamed.content) << "chunk " << chunk;
  }
  for (size_t split = 0; split <= text.size(); ++split) {
    ExtractedReasoning streamed = Stream(name, enable_thinking, testing::SplitAt(text, split));
    EXPECT_EQ(expected.reasoning, streamed.reasoning) << "split " << split;
    EXPECT_EQ(expected.content, streamed.content) << "split " << split;
  }
  return expected;
}

class ThinkTagParserTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ThinkTagParserTest, SplitsReasoningAndContent) {
  ExtractedReasoning result =
      ExtractEverySplit(GetParam(), true, "<think>Let me think: 2+2=4.</think>\n\nIt is 4.");
  EXPECT_EQ(result.reasoning, "Let me think: 2+2=4.");
  EXPECT_EQ(result.content, "\n\nIt is 4.");
}

TEST_P(ThinkTagParserTest, LeadingWhitespaceBeforeThink) {
  ExtractedReasoning result = ExtractEverySplit(GetParam(), true, "\n<think>hmm</think>ok");
  EXPECT_EQ(result.reasoning, "hmm");
  EXPECT_EQ(result.content, "ok");
}

TEST_P(ThinkTagParserTest, UnterminatedThinkingIsReasoning) {
  ExtractedReasoning result = ExtractEverySplit(GetParam(), true, "<think>still thinking</thi");
  EXPECT_EQ(result.reasoning, "still thinking</thi");
  EXPECT_EQ(result.content, std::nullopt);
}

TEST_P(ThinkTagParserTest, ThinkingDisabledIsAllContent) {
  std::string text = "<think>x</think>answer";
  ExtractedReasoning result = ExtractEverySplit(GetParam(), false, text);
  EXPECT_EQ(result.reasoning, std::nullopt);
  EXPECT_EQ(result.content, text);
}

TEST_P(ThinkTagParserTest, EmptyThinkBlock) {
  ExtractedReasoning result = ExtractEverySplit(GetParam(), true, "<think></think>Hello");
  EXPECT_EQ(result.reasoning, std::nullopt);
  EXPECT_EQ(result.content, "Hello");
}

INSTANTIATE_TEST_SUITE_P(Names, ThinkTagParserTest,
                         ::testing::Values("glm45", "qwen3", "deepseek_r1"));

class OpenTagRequiredTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OpenTagRequiredTest, NoOpeningTagIsAllContent) {
  std::string text = "Just an answer. </think> stays content.";
  ExtractedReasoning result = ExtractEverySplit(GetParam(), true, text);
  EXPECT_EQ(result.reasoning, std::nullopt);
  EXPECT_EQ(result.content, text);
}

TEST_P(OpenTagRequiredTest, PartialOpeningTagAloneIsContent) {
  ExtractedReasoning result = ExtractEverySplit(GetParam(), true, "<thi");
  EXPECT_EQ(result.content, "<thi");
}

INSTANTIATE_TEST_SUITE_P(Names, OpenTagRequiredTest, ::testing::Values("glm45", "qwen3"));

TEST(DeepSeekR1ReasoningTest, OpeningTagInPrompt) {
  ExtractedReasoning result =
      ExtractEverySplit("deepseek_r1", true, "First, recall facts.\n</think>\n\nParis.");
  EXPECT_EQ(result.reasoning, "First, recall facts.\n");
  EXPECT_EQ(result.content, "\n\nParis.");
}

TEST(DeepSeekR1ReasoningTest, NoClosingTagIsAllReasoning) {
  ExtractedReasoning result = ExtractEverySplit("deepseek_r1", true, "thinking forever");
  EXPECT_EQ(result.reasoning, "thinking forever");
  EXPECT_EQ(result.content, std::nullopt);
}

TEST(DeepSeekR1ReasoningTest, ThinkingDisabledIsAllContent) {
  ExtractedReasoning result = ExtractEverySplit("deepseek_r1", false, "a</think>b");
  EXPECT_EQ(result.content, "a</think>b");
}

TEST(ReasoningParserFactoryTest, UnknownNameListsSupported) {
  StatusOr<std::unique_ptr<ReasoningParser>> parser = MakeReasoningParser("granite", true);
  ASSERT_FALSE(parser.ok());
  EXPECT_EQ(parser.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parser.status().message().find("deepseek_r1, glm45, qwen3"), std::string::npos);
}

}  // namespace
}  // namespace tandem::parsers
