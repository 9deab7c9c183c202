#include "proxy/kv_event_subscriber.h"

#include <algorithm>
#include <optional>
#include <zmq.hpp>

#include "common/logging.h"

namespace tandem::proxy {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

struct KvEventSubscriber::Impl {
  struct Source {
    KvEventSource config;
    std::unique_ptr<zmq::socket_t> socket;
    std::unique_ptr<zmq::socket_t> replay;  // DEALER to the publisher's ROUTER, or null
    std::optional<uint64_t> last_seq;
    bool up = true;
    // Guarded by Impl::mu: when work that must produce events was first sent since
    // the last event (nullopt: nothing outstanding), and the last event's arrival.
    std::optional<Clock::time_point> expect_since;
    Clock::time_point last_event{};
    Counter* events = nullptr;
    Counter* drops = nullptr;
  };

  KvEventSubscriberOptions options;
  PrefixIndex* index = nullptr;
  Gauge* index_blocks = nullptr;
  Counter* malformed = nullptr;
  Counter* replayed = nullptr;
  zmq::context_t context{1};
  std::vector<Source> sources;
  std::mutex mu;  // guards expect_since / last_event
  std::atomic<bool> stop{false};
  std::thread thread;

  void Drop(Source& s, const std::string& why) {
    TANDEM_LOG(WARNING) << "kv events of " << s.config.name << ": " << why
                        << "; its prefix-index entries are dropped";
    index->DropInstance(s.config.instance);
    if (s.drops != nullptr) s.drops->Add(1);
  }

  void Receive(Source& s) {
    std::vector<zmq::message_t> frames;
    while (true) {
      zmq::message_t frame;
      auto got = s.socket->recv(frame, zmq::recv_flags::dontwait);
      if (!got) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      s.expect_since.reset();
      s.last_event = Clock::now();
    }
    if (s.events != nullptr) s.events->Add(1);
    if (frames.size() != 3 || frames[1].size() != 8) {
      if (malformed != nullptr) malformed->Add(1);
      return Drop(s, "a message that is not [topic, 8-byte seq, payload]");
    }
    uint64_t seq = 0;
    const auto* p = static_cast<const uint8_t*>(frames[1].data());
    for (int i = 0; i < 8; ++i) seq = (seq << 8) | p[i];
    if (s.last_seq && seq > *s.last_seq + 1 && s.replay && Replay(s, *s.last_seq + 1, seq)) {
      // The missing batches were replayed and applied; this one follows them.
    } else if (s.last_seq && seq != *s.last_seq + 1) {
      Drop(s, seq > *s.last_seq
                  ? "sequence gap " + std::to_string(*s.last_seq) + " -> " + std::to_string(seq)
                  : "sequence went back (publisher restarted)");
    }
    s.last_seq = seq;
    StatusOr<KvEventBatch> batch = DecodeKvEventBatch(
        std::string_view(static_cast<const char*>(frames[2].data()), frames[2].size()));
    if (!batch.ok()) {
      if (malformed != nullptr) malformed->Add(1);
      return Drop(s, "undecodable batch: " + batch.status().message());
    }
    index->Apply(s.config.instance, *batch);
  }

  // Asks the publisher's replay socket for batches [from, until) and applies them when
  // all arrive, in order, within kReplayTimeout; false (nothing applied) otherwise.
  // Protocol (vLLM's): send ["", from as 8 bytes big-endian]; answers are
  // ["", seq, payload] per buffered batch from `from` on, then ["", ff x 8, ""].
  bool Replay(Source& s, uint64_t from, uint64_t until) {
    constexpr auto kReplayTimeout = std::chrono::milliseconds(1000);
    zmq::socket_t& r = *s.replay;
    zmq::message_t stale;  // answers to an earlier replay that timed out
    while (r.recv(stale, zmq::recv_flags::dontwait)) {
    }
    std::string start(8, '\0');
    for (int i = 0; i < 8; ++i) start[7 - i] = static_cast<char>((from >> (8 * i)) & 0xff);
    if (!r.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !r.send(zmq::buffer(start), zmq::send_flags::dontwait)) {
      return false;
    }
    std::vector<KvEventBatch> batches;
    const auto deadline = Clock::now() + kReplayTimeout;
    while (Clock::now() < deadline) {
      zmq::pollitem_t item{r.handle(), 0, ZMQ_POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(1))) == 0) break;
      std::vector<zmq::message_t> frames;
      while (true) {
        zmq::message_t frame;
        if (!r.recv(frame, zmq::recv_flags::dontwait)) break;
        const bool more = frame.more();
        frames.push_back(std::move(frame));
        if (!more) break;
      }
      if (frames.size() != 3 || frames[1].size() != 8) return false;
      uint64_t seq = 0;
      const auto* p = static_cast<const uint8_t*>(frames[1].data());
      for (int i = 0; i < 8; ++i) seq = (seq << 8) | p[i];
      if (seq == ~uint64_t{0}) break;  // the end marker (-1)
      if (seq < from + batches.size() || seq >= until) continue;
      if (seq != from + batches.size()) return false;  // the buffer no longer holds them
      StatusOr<KvEventBatch> batch = DecodeKvEventBatch(
          std::string_view(static_cast<const char*>(frames[2].data()), frames[2].size()));
      if (!batch.ok()) return false;
      batches.push_back(std::move(*batch));
      if (from + batches.size() == until) break;
    }
    if (from + batches.size() != until) return false;
    for (const KvEventBatch& b : batches) index->Apply(s.config.instance, b);
    TANDEM_LOG(INFO) << "kv events of " << s.config.name << ": replayed " << batches.size()
                     << " missed batches";
    if (replayed != nullptr) replayed->Add(static_cast<double>(batches.size()));
    return true;
  }

  void CheckLiveness() {
    const Clock::time_point now = Clock::now();
    for (Source& s : sources) {
      const bool up = !options.is_up || options.is_up(s.config.instance);
      if (s.up && !up) Drop(s, "the instance is down");
      s.up = up;
      bool silent = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (s.expect_since && now - *s.expect_since > options.silence_timeout) {
          silent = true;
          s.expect_since.reset();
        }
      }
      if (silent) {
        Drop(s, "no event for " + std::to_string(options.silence_timeout.count()) +
                    " ms after work was sent");
      }
    }
    if (index_blocks != nullptr) index_blocks->Set(static_cast<double>(index->num_blocks()));
  }

  void Loop() {
    std::vector<zmq::pollitem_t> items;
    for (Source& s : sources) items.push_back({s.socket->handle(), 0, ZMQ_POLLIN, 0});
    Clock::time_point next_check = Clock::now();
    while (!stop.load()) {
      try {
        zmq::poll(items.data(), items.size(), options.poll_interval);
        for (size_t i = 0; i < items.size(); ++i) {
          if (items[i].revents & ZMQ_POLLIN) Receive(sources[i]);
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        TANDEM_LOG(WARNING) << "kv events: " << e.what();
      }
      if (Clock::now() >= next_check) {
        CheckLiveness();
        next_check = Clock::now() + options.poll_interval;
      }
    }
  }
};

StatusOr<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::Create(
    KvEventSubscriberOptions options, PrefixIndex* index, MetricsRegistry* metrics) {
  auto impl = std::make_unique<Impl>();
  impl->index = index;
  if (metrics != nullptr) {
    impl->index_blocks = metrics->GetGauge("tandem_proxy_prefix_index_blocks",
                                           "Distinct KV blocks in the proxy's prefix index");
    impl->malformed = metrics->GetCounter("tandem_proxy_kv_events_malformed",
                                          "KV-event messages that could not be decoded");
    impl->replayed = metrics->GetCounter("tandem_proxy_kv_event_batches_replayed",
                                         "Missed KV-event batches recovered from replay sockets");
  }
  for (const KvEventSource& config : options.sources) {
    Impl::Source s;
    s.config = config;
    try {
      s.socket = std::make_unique<zmq::socket_t>(impl->context, zmq::socket_type::sub);
      s.socket->set(zmq::sockopt::linger, 0);
      s.socket->set(zmq::sockopt::subscribe, config.topic);
      s.socket->connect(config.endpoint);
      if (!config.replay_endpoint.empty()) {
        s.replay = std::make_unique<zmq::socket_t>(impl->context, zmq::socket_type::dealer);
        s.replay->set(zmq::sockopt::linger, 0);
        s.replay->connect(config.replay_endpoint);
      }
    } catch (const zmq::error_t& e) {
      const std::string replay =
          config.replay_endpoint.empty() ? "" : " (replay '" + config.replay_endpoint + "')";
      return InvalidArgumentError("kv events endpoint '" + config.endpoint + "'" + replay + " of " +
                                  config.name + ": " + e.what());
    }
    if (metrics != nullptr) {
      MetricLabels labels{{"instance", config.name}};
      s.events = metrics->GetCounter("tandem_proxy_kv_event_batches", "KV-event messages received",
                                     labels);
      s.drops = metrics->GetCounter(
          "tandem_proxy_kv_event_index_drops",
          "Times an instance's prefix-index entries were dropped (gap, restart, down, silence)",
          labels);
    }
    impl->sources.push_back(std::move(s));
  }
  impl->options = std::move(options);
  return std::unique_ptr<KvEventSubscriber>(new KvEventSubscriber(std::move(impl)));
}

KvEventSubscriber::KvEventSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvEventSubscriber::~KvEventSubscriber() { Stop(); }

void KvEventSubscriber::Start() {
  if (impl_->thread.joinable() || impl_->sources.empty()) return;
  impl_->thread = std::thread([impl = impl_.get()] { impl->Loop(); });
}

void KvEventSubscriber::Stop() {
  impl_->stop = true;
  if (impl_->thread.joinable()) impl_->thread.join();
  for (Impl::Source& s : impl_->sources) {
    if (s.socket) s.socket->close();
    if (s.replay) s.replay->close();
  }
}

void KvEventSubscriber::ExpectEvents(int instance) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (Impl::Source& s : impl_->sources) {
    if (s.config.instance == instance && !s.expect_since) s.expect_since = Clock::now();
  }
}

}  // namespace tandem::proxy
