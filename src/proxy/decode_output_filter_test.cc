#include "proxy/decode_output_filter.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::proxy {
namespace {

std::string Event(const std::string& data) { return "data: " + data + "\n\n"; }

const std::string kChunk1 =
    R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"Hel","logprobs":null,"finish_reason":null,"stop_reason":null}]})";
const std::string kChunk2 =
    R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"lo","logprobs":null,"finish_reason":"length","stop_reason":null}]})";
const std::string kUsage =
    R"({"id":"cmpl-1","object":"text_completion","choices":[],"usage":{"prompt_tokens":40,"total_tokens":42,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":40}}})";

TEST(DecodeOutputFilterTest, ForwardsEventsUnchangedExceptCachedTokens) {
  const std::string stream = Event(kChunk1) + Event(kChunk2) + Event(kUsage) + Event("[DONE]");
  std::string expected = stream;
  expected.replace(expected.find("\"cached_tokens\":40") + 16, 2, "16");
  // Cut at every position: the output is the same.
  for (size_t cut = 0; cut <= stream.size(); cut += 7) {
    DecodeOutputFilter filter(16, false);
    std::string out = filter.FeedStream(std::string_view(stream).substr(0, cut));
    out += filter.FeedStream(std::string_view(stream).substr(cut));
    out += filter.FinishStream();
    EXPECT_EQ(out, expected) << "cut at " << cut;
    EXPECT_TRUE(filter.saw_done());
    EXPECT_EQ(filter.text(), "Hello");
    EXPECT_EQ(filter.tokens(), 2);
  }
}

TEST(DecodeOutputFilterTest, HoldsAnIncompleteEvent) {
  DecodeOutputFilter filter(std::nullopt, false);
  EXPECT_EQ(filter.FeedStream("data: {\"choices\":[]"), "");
  EXPECT_EQ(filter.FeedStream("}\n"), "");
  EXPECT_EQ(filter.FeedStream("\n"), "data: {\"choices\":[]}\n\n");
  EXPECT_EQ(filter.FeedStream("data: [DONE]\r\n\r\n"), "data: [DONE]\r\n\r\n");
  EXPECT_TRUE(filter.saw_done());
  EXPECT_EQ(filter.FeedStream(": keep-alive"), "");
  EXPECT_EQ(filter.FinishStream(), ": keep-alive");
}

TEST(DecodeOutputFilterTest, WithoutAPrefillFigureKeepsTheDecodersBytes) {
  DecodeOutputFilter filter(std::nullopt, false);
  EXPECT_EQ(filter.FeedStream(Event(kUsage)), Event(kUsage));
}

TEST(DecodeOutputFilterTest, StopsAtRecomputed) {
  const std::string recomputed =
      R"({"choices":[{"index":0,"text":" wor","finish_reason":"stop","stop_reason":"recomputed"}]})";
  DecodeOutputFilter filter(3, false);
  std::string out =
      filter.FeedStream(Event(kChunk1) + Event(recomputed) + Event(kUsage) + Event("[DONE]"));
  EXPECT_TRUE(filter.recomputed());
  EXPECT_FALSE(filter.saw_done());
  EXPECT_EQ(filter.text(), "Hel wor");
  EXPECT_EQ(filter.tokens(), 2);
  // The recomputed chunk's text goes out without its end; nothing after it.
  ASSERT_EQ(out.find(Event(kChunk1)), 0u);
  std::string rest = out.substr(Event(kChunk1).size());
  ASSERT_EQ(rest.rfind("data: ", 0), 0u);
  auto j = nlohmann::json::parse(rest.substr(6));
  EXPECT_EQ(j["choices"][0]["text"], " wor");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_EQ(filter.FeedStream(Event(kChunk2)), "");
}

TEST(DecodeOutputFilterTest, ContinuationDropsTheRepeatedRoleChunk) {
  const std::string role =
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})";
  const std::string content =
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]})";
  DecodeOutputFilter first(std::nullopt, false);
  EXPECT_EQ(first.FeedStream(Event(role) + Event(content)), Event(role) + Event(content));
  DecodeOutputFilter later(std::nullopt, true);
  EXPECT_EQ(later.FeedStream(Event(role) + Event(content)), Event(content));
  EXPECT_EQ(later.text(), "x");
}

TEST(DecodeOutputFilterTest, FiltersAWholeBody) {
  const std::string body =
      R"({"id":"cmpl-2","choices":[{"index":0,"text":"Hello","finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":40,"total_tokens":45,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":40}},"kv_transfer_params":null})";
  DecodeOutputFilter filter(0, false);
  std::string out = filter.FilterBody(body);
  std::string expected = body;
  expected.replace(expected.find("\"cached_tokens\":40") + 16, 2, "0");
  EXPECT_EQ(out, expected);
  EXPECT_FALSE(filter.recomputed());
  EXPECT_EQ(filter.text(), "Hello");
  EXPECT_EQ(filter.tokens(), 5);
}

TEST(DecodeOutputFilterTest, PrependsEarlierSegments) {
  const std::string completion =
      R"({"choices":[{"index":0,"text":"lo","finish_reason":"length"}],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}})";
  auto j = nlohmann::json::parse(DecodeOutputFilter::PrependSegments(completion, false, "Hel", 3));
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 9);
  EXPECT_EQ(j["usage"]["total_tokens"], 14);
  const std::string chat =
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":"lo"},"finish_reason":"stop"}]})";
  auto c = nlohmann::json::parse(DecodeOutputFilter::PrependSegments(chat, true, "Hel", 1));
  EXPECT_EQ(c["choices"][0]["message"]["content"], "Hello");
}

}  // namespace
}  // namespace tandem::proxy
