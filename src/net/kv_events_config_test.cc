#include "net/kv_events_config.h"

#include <gtest/gtest.h>

namespace tandem::net {
namespace {

TEST(KvEventsConfigTest, DefaultsAreVllms) {
  auto c = ParseKvEventsConfig(R"({"enable_kv_cache_events": true})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->publishes());
  EXPECT_EQ(c->publisher, "zmq");  // chosen from enable_kv_cache_events
  EXPECT_EQ(c->endpoint, "tcp://*:5557");
  EXPECT_EQ(c->replay_endpoint, "");
  EXPECT_EQ(c->buffer_steps, 10000);
  EXPECT_EQ(c->hwm, 100000);
  EXPECT_EQ(c->max_queue_size, 100000);
  EXPECT_EQ(c->topic, "");
  auto off = ParseKvEventsConfig("{}");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->publisher, "null");
  EXPECT_FALSE(off->publishes());
  // "zmq" without enable_kv_cache_events publishes nothing (vLLM's factory says the same).
  auto disabled = ParseKvEventsConfig(R"({"publisher": "zmq"})");
  ASSERT_TRUE(disabled.ok());
  EXPECT_FALSE(disabled->publishes());
  auto null_pub = ParseKvEventsConfig(R"({"enable_kv_cache_events": true, "publisher": "null"})");
  ASSERT_TRUE(null_pub.ok());
  EXPECT_FALSE(null_pub->publishes());
}

TEST(KvEventsConfigTest, EveryKey) {
  auto c = ParseKvEventsConfig(
      R"({"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "ipc:///tmp/e",
          "replay_endpoint": "tcp://*:5558", "buffer_steps": 5, "hwm": 0,
          "max_queue_size": 7, "topic": "kv-events"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->endpoint, "ipc:///tmp/e");
  EXPECT_EQ(c->replay_endpoint, "tcp://*:5558");
  EXPECT_EQ(c->buffer_steps, 5);
  EXPECT_EQ(c->hwm, 0);
  EXPECT_EQ(c->max_queue_size, 7);
  EXPECT_EQ(c->topic, "kv-events");
  auto null_replay = ParseKvEventsConfig(R"({"replay_endpoint": null})");
  ASSERT_TRUE(null_replay.ok());
  EXPECT_EQ(null_replay->replay_endpoint, "");
}

TEST(KvEventsConfigTest, BadInputNamesTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"{not json", "not valid JSON"},
      {"[1]", "expected a JSON object"},
      {R"({"enable_kv_cache_events": true, "publisher": "kafka"})", "unknown publisher \"kafka\""},
      {R"({"enable_kv_cache_events": "yes"})", "enable_kv_cache_events must be true or false"},
      {R"({"endpoint": 5557})", "endpoint must be a string"},
      {R"({"endpoint": ""})", "endpoint must not be empty"},
      {R"({"buffer_steps": 0})", "buffer_steps must be in [1"},
      {R"({"hwm": -1})", "hwm must be in [0"},
      {R"({"max_queue_size": 0})", "max_queue_size must be in [1"},
      {R"({"max_queue_size": 1.5})", "max_queue_size must be an integer"},
      {R"({"topik": "x"})", "unknown key \"topik\""},
  };
  for (const auto& [text, message] : cases) {
    auto c = ParseKvEventsConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(c.status().message().find("--kv-events-config"), std::string::npos);
    EXPECT_NE(c.status().message().find(message), std::string::npos) << c.status().message();
  }
}

TEST(KvEventsConfigTest, DataParallelRankOffsetsThePort) {
  EXPECT_EQ(*OffsetEndpointPort("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(*OffsetEndpointPort("tcp://*:5557", 3), "tcp://*:5560");
  EXPECT_EQ(*OffsetEndpointPort("tcp://10.0.0.1:5557", 1), "tcp://10.0.0.1:5558");
  EXPECT_EQ(*OffsetEndpointPort("inproc://cache", 2), "inproc://cache_dp2");
  EXPECT_EQ(*OffsetEndpointPort("", 2), "");
  EXPECT_EQ(*OffsetEndpointPort("ipc:///tmp/x", 0), "ipc:///tmp/x");
  EXPECT_FALSE(OffsetEndpointPort("ipc:///tmp/x", 1).ok());
  EXPECT_FALSE(OffsetEndpointPort("tcp://*:65535", 1).ok());
  EXPECT_FALSE(OffsetEndpointPort("tcp://*:abc", 1).ok());
}

}  // namespace
}  // namespace tandem::net
