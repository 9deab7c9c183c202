// KvEventSubscriber against a real ZMQ PUB socket on 127.0.0.1 in the same process.
#include "proxy/kv_event_subscriber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace tandem::proxy {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

// msgpack of [1.0, [["BlockStored", [b"\x01"*16], None, [1, 2], 2, None, "GPU"]], None]
// with the hash byte replaced by `tag` (Python msgpack bytes, one hash byte patched).
std::string StoredBatch(char tag) {
  std::string b = "\x93\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x91\x97\xab"s + "BlockStored" +
                  "\x91\xc4\x10"s + std::string(16, tag) + "\xc0\x92\x01\x02\x02\xc0\xa3GPU\xc0"s;
  return b;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

class SubscriberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pub_.set(zmq::sockopt::linger, 0);
    pub_.bind("tcp://127.0.0.1:*");
    endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
  }

  std::unique_ptr<KvEventSubscriber> Subscribe(std::chrono::milliseconds silence = 30s,
                                               std::string replay_endpoint = "") {
    KvEventSubscriberOptions options;
    options.sources.push_back({0, "a", endpoint_, "kv", replay_endpoint});
    options.silence_timeout = silence;
    options.poll_interval = 20ms;
    options.is_up = [this](int) { return up_.load(); };
    auto sub = KvEventSubscriber::Create(std::move(options), &index_, &metrics_);
    EXPECT_TRUE(sub.ok()) << sub.status().ToString();
    (*sub)->Start();
    return std::move(*sub);
  }

  void Publish(uint64_t seq, const std::string& payload, const std::string& topic = "kv") {
    std::string seq_bytes(8, '\0');
    for (int i = 7; i >= 0; --i, seq >>= 8) seq_bytes[i] = static_cast<char>(seq & 0xff);
    pub_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

  // Publishes seq 0 until the subscriber has it (PUB drops until SUB has joined). The
  // repeats that arrive count as restarts (seq went back): drops are counted from here.
  void Join() {
    ASSERT_TRUE(WaitFor([&] {
      Publish(0, StoredBatch('a'));
      return index_.num_blocks() == 1;
    }));
    std::this_thread::sleep_for(100ms);
    base_drops_ = TotalDrops();
  }

  double TotalDrops() {
    return metrics_.GetCounter("tandem_proxy_kv_event_index_drops", "", {{"instance", "a"}})
        ->value();
  }
  double Drops() { return TotalDrops() - base_drops_; }
  double base_drops_ = 0;

  zmq::context_t ctx_;
  zmq::socket_t pub_{ctx_, zmq::socket_type::pub};
  std::string endpoint_;
  PrefixIndex index_;
  MetricsRegistry metrics_;
  std::atomic<bool> up_{true};
};

TEST_F(SubscriberTest, AppliesEventsInOrderAndFiltersTopics) {
  auto sub = Subscribe();
  Join();
  Publish(1, StoredBatch('b'), "other");  // another topic: not received
  Publish(1, StoredBatch('b'));
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 2; }));
  EXPECT_EQ(Drops(), 0);
}

TEST_F(SubscriberTest, SequenceGapDropsTheInstance) {
  auto sub = Subscribe();
  Join();
  Publish(2, StoredBatch('c'));  // seq 1 was lost: a removal may be missing
  ASSERT_TRUE(WaitFor([&] { return Drops() == 1; }));
  // What came after the gap is kept; what came before is gone.
  EXPECT_EQ(index_.num_blocks(), 1u);
  EXPECT_EQ(index_.MatchPrefix(std::vector<int32_t>{1, 2}).size(), 1u);
  Publish(3, StoredBatch('d'));
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 2; }));
  EXPECT_EQ(Drops(), 1);
}

TEST_F(SubscriberTest, MalformedMessageDropsTheInstance) {
  auto sub = Subscribe();
  Join();
  Publish(1, "\x93\xcb"s);  // truncated
  ASSERT_TRUE(WaitFor([&] { return Drops() == 1 && index_.num_blocks() == 0; }));
}

TEST_F(SubscriberTest, SilenceAfterExpectedWorkDropsTheInstance) {
  auto sub = Subscribe(/*silence=*/500ms);
  Join();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(index_.num_blocks(), 1u);  // idle and silent: nothing expected, kept
  sub->ExpectEvents(0);
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 0; }));
  EXPECT_EQ(Drops(), 1);
  // An event answers the expectation: no drop.
  Publish(1, StoredBatch('e'));
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 1; }));
  sub->ExpectEvents(0);
  Publish(2, StoredBatch('f'));
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(index_.num_blocks(), 2u);
}

TEST_F(SubscriberTest, DownInstanceIsDropped) {
  auto sub = Subscribe();
  Join();
  up_ = false;
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 0; }));
  EXPECT_EQ(Drops(), 1);
}

// A publisher's replay socket (ROUTER), answering from `buffer` (seq -> payload) as
// vLLM's publisher does, on its own thread.
class ReplayServer {
 public:
  ReplayServer(zmq::context_t& ctx, std::map<uint64_t, std::string> buffer)
      : router_(ctx, zmq::socket_type::router), buffer_(std::move(buffer)) {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ReplayServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  int requests() const { return requests_; }

 private:
  static std::string Seq(uint64_t seq) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i, seq >>= 8) out[i] = static_cast<char>(seq & 0xff);
    return out;
  }
  void Serve() {
    while (!stop_) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0) continue;
      std::vector<zmq::message_t> frames;
      do {
        frames.emplace_back();
        (void)router_.recv(frames.back());
      } while (frames.back().more());
      ASSERT_EQ(frames.size(), 3u);  // identity, "", start_seq
      ++requests_;
      uint64_t start = 0;
      for (int i = 0; i < 8; ++i)
        start = (start << 8) | static_cast<uint8_t>(frames[2].data<char>()[i]);
      const std::string id = frames[0].to_string();
      for (auto it = buffer_.lower_bound(start); it != buffer_.end(); ++it) {
        router_.send(zmq::buffer(id), zmq::send_flags::sndmore);
        router_.send(zmq::message_t(), zmq::send_flags::sndmore);
        router_.send(zmq::buffer(Seq(it->first)), zmq::send_flags::sndmore);
        router_.send(zmq::buffer(it->second), zmq::send_flags::none);
      }
      router_.send(zmq::buffer(id), zmq::send_flags::sndmore);
      router_.send(zmq::message_t(), zmq::send_flags::sndmore);
      router_.send(zmq::buffer(std::string(8, '\xff')), zmq::send_flags::sndmore);
      router_.send(zmq::message_t(), zmq::send_flags::none);
    }
  }

  zmq::socket_t router_;
  std::map<uint64_t, std::string> buffer_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST_F(SubscriberTest, GapIsFilledFromTheReplaySocket) {
  // The publisher still buffers seq 1 and 2.
  ReplayServer replay(ctx_, {{1, StoredBatch('b')}, {2, StoredBatch('c')}});
  auto sub = Subscribe(30s, replay.endpoint());
  Join();
  Publish(2, StoredBatch('c'));                                    // seq 1 was lost on PUB
  ASSERT_TRUE(WaitFor([&] { return index_.num_blocks() == 3; }));  // a, b (replayed), c
  EXPECT_EQ(Drops(), 0);
  EXPECT_EQ(replay.requests(), 1);
  EXPECT_EQ(metrics_.GetCounter("tandem_proxy_kv_event_batches_replayed", "")->value(), 1);
}

TEST_F(SubscriberTest, GapTheReplayBufferNoLongerHoldsDrops) {
  ReplayServer replay(ctx_, {{5, StoredBatch('e')}});  // seq 1-4 aged out
  auto sub = Subscribe(30s, replay.endpoint());
  Join();
  Publish(5, StoredBatch('e'));
  ASSERT_TRUE(WaitFor([&] { return Drops() == 1; }));
  EXPECT_EQ(index_.num_blocks(), 1u);  // only what came after the gap
  EXPECT_EQ(replay.requests(), 1);
}

TEST(KvEventSubscriberCreateTest, MalformedEndpointIsInvalidArgument) {
  PrefixIndex index;
  KvEventSubscriberOptions options;
  options.sources.push_back({0, "a", "nonsense", "", ""});
  auto sub = KvEventSubscriber::Create(std::move(options), &index, nullptr);
  EXPECT_EQ(sub.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::proxy
