#include "net/kv_event_publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/metrics.h"

namespace tandem::net {
namespace {

using Clock = std::chrono::steady_clock;

// A unique ipc:// endpoint; the socket file is removed when the test binary exits (ZMQ
// leaves it behind).
std::string IpcEndpoint(const std::string& name) {
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const std::string& p : paths) std::remove(p.c_str());
    }
  };
  static Cleanup cleanup;
  const std::string path = "/tmp/tandem-kv-events-test-" + std::to_string(getpid()) + "-" + name;
  cleanup.paths.push_back(path);
  return "ipc://" + path;
}

uint64_t Seq(const zmq::message_t& m) {
  EXPECT_EQ(m.size(), 8u);
  uint64_t v = 0;
  for (size_t i = 0; i < m.size(); ++i) v = (v << 8) | static_cast<const uint8_t*>(m.data())[i];
  return v;
}

// Receives one multipart message, or an empty vector after `timeout_ms`.
std::vector<zmq::message_t> RecvMultipart(zmq::socket_t& s, int timeout_ms = 5000) {
  s.set(zmq::sockopt::rcvtimeo, timeout_ms);
  std::vector<zmq::message_t> frames;
  while (true) {
    zmq::message_t m;
    if (!s.recv(m)) return {};
    const bool more = m.more();
    frames.push_back(std::move(m));
    if (!more) return frames;
  }
}

TEST(KvEventPublisherTest, PublishesSequencedBatchesAndReplaysThem) {
  KvEventPublisherOptions o;
  o.endpoint = IpcEndpoint("pub");
  o.replay_endpoint = IpcEndpoint("replay");
  o.buffer_steps = 3;
  o.topic = "kv";
  MetricsRegistry metrics;
  auto pub = KvEventPublisher::Create(o, &metrics);
  ASSERT_TRUE(pub.ok()) << pub.status().message();

  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.connect(o.endpoint);
  // A new subscriber misses what was sent before it joined (ZMQ's slow joiner): publish
  // until one batch arrives, then check that the following ones are consecutive.
  uint64_t first = 0;
  for (int i = 0;; ++i) {
    ASSERT_LT(i, 500) << "no batch reached the subscriber";
    ASSERT_TRUE((*pub)->Publish("probe", 1));
    std::vector<zmq::message_t> m = RecvMultipart(sub, 20);
    if (m.empty()) continue;
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].to_string(), "kv");
    EXPECT_EQ(m[2].to_string(), "probe");
    first = Seq(m[1]);
    break;
  }
  // Drain the probes still in flight, then send numbered batches.
  while (!RecvMultipart(sub, 100).empty()) {
  }
  const uint64_t sent_before = (*pub)->batches_sent();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*pub)->Publish("batch" + std::to_string(i), 2));
  for (int i = 0; i < 5; ++i) {
    std::vector<zmq::message_t> m = RecvMultipart(sub);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(Seq(m[1]), sent_before + static_cast<uint64_t>(i));
    EXPECT_EQ(m[2].to_string(), "batch" + std::to_string(i));
  }
  EXPECT_GE(sent_before, first + 1);

  // Replay from two batches back: the buffer (3 deep) answers [seq, payload]... then the end
  // marker [ff x 8, ""].
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.connect(o.replay_endpoint);
  const uint64_t start = sent_before + 3;
  std::string start_bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    start_bytes[static_cast<size_t>(i)] = static_cast<char>(start >> (56 - 8 * i));
  dealer.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start_bytes));
  for (int i = 3; i < 5; ++i) {
    std::vector<zmq::message_t> m = RecvMultipart(dealer);
    ASSERT_EQ(m.size(), 3u);  // [delimiter, seq, payload]
    EXPECT_EQ(m[0].size(), 0u);
    EXPECT_EQ(Seq(m[1]), sent_before + static_cast<uint64_t>(i));
    EXPECT_EQ(m[2].to_string(), "batch" + std::to_string(i));
  }
  std::vector<zmq::message_t> end = RecvMultipart(dealer);
  ASSERT_EQ(end.size(), 3u);
  EXPECT_EQ(end[1].to_string(), std::string(8, '\xff'));
  EXPECT_EQ(end[2].size(), 0u);
  // From 0: only the last 3 batches are still buffered.
  dealer.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(std::string(8, '\0')));
  for (int i = 2; i < 5; ++i) {
    std::vector<zmq::message_t> m = RecvMultipart(dealer);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(Seq(m[1]), sent_before + static_cast<uint64_t>(i));
  }
  EXPECT_EQ(RecvMultipart(dealer)[1].to_string(), std::string(8, '\xff'));
  EXPECT_NE(metrics.RenderPrometheus().find("tandem_kv_event_batches_published_total"),
            std::string::npos);
}

TEST(KvEventPublisherTest, AFullQueueDropsAndCountsWithoutBlocking) {
  KvEventPublisherOptions o;
  o.endpoint = IpcEndpoint("slow");
  o.max_queue_size = 2;
  o.fault_send_delay_ms = 300;  // a stalled network: one send per 300 ms
  MetricsRegistry metrics;
  auto pub = KvEventPublisher::Create(o, &metrics);
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  const auto begin = Clock::now();
  int accepted = 0;
  for (int i = 0; i < 20; ++i) accepted += (*pub)->Publish("x", 3) ? 1 : 0;
  const auto elapsed = Clock::now() - begin;
  EXPECT_LT(elapsed, std::chrono::milliseconds(250)) << "Publish blocked on the slow sender";
  // At most the queue (2) plus the batch being sent (1) plus one more per 300 ms elapsed.
  EXPECT_LE(accepted, 4);
  EXPECT_EQ((*pub)->batches_dropped(), static_cast<uint64_t>(20 - accepted));
  EXPECT_EQ((*pub)->events_dropped(), 3u * (20 - accepted));
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("tandem_kv_events_dropped_total " + std::to_string(3 * (20 - accepted))),
            std::string::npos)
      << text;
  pub->reset();  // sends what was accepted
}

TEST(KvEventPublisherTest, AnEndpointThatCannotBindIsInvalidArgument) {
  // Hold a port, so binding it again fails.
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::pub);
  holder.bind("tcp://127.0.0.1:*");
  const std::string taken = holder.get(zmq::sockopt::last_endpoint);
  const std::string port = taken.substr(taken.rfind(':') + 1);
  KvEventPublisherOptions o;
  o.endpoint = "tcp://*:" + port;
  auto busy = KvEventPublisher::Create(o, nullptr);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(busy.status().message().find(o.endpoint), std::string::npos) << busy.status().message();
  o.endpoint = "nonsense://x";
  EXPECT_EQ(KvEventPublisher::Create(o, nullptr).status().code(), StatusCode::kInvalidArgument);
  o.endpoint = IpcEndpoint("ok");
  o.replay_endpoint = "tcp://*:" + port;  // the replay socket is checked too
  auto replay = KvEventPublisher::Create(o, nullptr);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find(o.replay_endpoint), std::string::npos);
}

}  // namespace
}  // namespace tandem::net
