#include "net/sse.h"

#include <gtest/gtest.h>

namespace tandem::net {
namespace {

std::vector<std::string> ParseAll(std::string_view bytes, size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    EXPECT_TRUE(parser.Feed(bytes.substr(i, piece), &events).ok());
  }
  return events;
}

TEST(SseTest, EventFraming) {
  EXPECT_EQ(SseEvent("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent("[DONE]"), "data: [DONE]\n\n");
  EXPECT_EQ(SseEvent("a\nb"), "data: a\ndata: b\n\n");
  EXPECT_EQ(SseEvent(""), "data: \n\n");
}

TEST(SseTest, ParsesAcrossEverySplit) {
  std::string stream = SseEvent("one") + ": comment\n" + "event: x\nid: 7\ndata: two\r\n\r\n" +
                       "data:three\rdata: more\r\r" + SseEvent("multi\nline") + "data: tail";
  std::vector<std::string> expected = {"one", "two", "three\nmore", "multi\nline"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EXPECT_EQ(ParseAll(stream, piece), expected) << "piece size " << piece;
  }
}

TEST(SseTest, IgnoresEventsWithoutData) {
  EXPECT_TRUE(ParseAll("event: ping\n\n: keepalive\n\n", 3).empty());
  EXPECT_EQ(ParseAll("data\n\n", 1), std::vector<std::string>{""});
}

TEST(SseTest, RoundTripsSseEvent) {
  std::string payload = "line1\r\nline2\rline3";
  EXPECT_EQ(ParseAll(SseEvent(payload), 2), std::vector<std::string>{"line1\nline2\nline3"});
}

TEST(SseTest, BoundsOneEvent) {
  SseParser parser(/*max_event_bytes=*/16);
  std::vector<std::string> events;
  EXPECT_TRUE(parser.Feed("data: short\n\n", &events).ok());
  EXPECT_EQ(events.size(), 1u);
  Status s = parser.Feed("data: " + std::string(64, 'x'), &events);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(parser.Feed("data: ok\n\n", &events).code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tandem::net
