#include "proxy/kv_event_subscriber.h"

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
    if (s.last_seq && seq != *s.last_seq + 1) {
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
  }
  for (const KvEventSource& config : options.sources) {
    Impl::Source s;
    s.config = config;
    try {
      s.socket = std::make_unique<zmq::socket_t>(impl->context, zmq::socket_type::sub);
      s.socket->set(zmq::sockopt::linger, 0);
      s.socket->set(zmq::sockopt::subscribe, config.topic);
      s.socket->connect(config.endpoint);
    } catch (const zmq::error_t& e) {
      return InvalidArgumentError("kv events endpoint '" + config.endpoint + "' of " + config.name +
                                  ": " + e.what());
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
  }
}

void KvEventSubscriber::ExpectEvents(int instance) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (Impl::Source& s : impl_->sources) {
    if (s.config.instance == instance && !s.expect_since) s.expect_since = Clock::now();
  }
}

}  // namespace tandem::proxy
