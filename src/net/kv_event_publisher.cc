#include "net/kv_event_publisher.h"

#include <chrono>
#include <vector>
#include <zmq.hpp>

#include "common/logging.h"
#include "common/metrics.h"

namespace tandem::net {
namespace {

// vLLM's heuristic: a wildcard or a local transport is ours to bind ("bind stable, connect
// volatile"); a concrete tcp address is a collector we connect to.
bool ShouldBind(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

std::string BigEndian8(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

uint64_t FromBigEndian8(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// How long the publisher thread sleeps between looks at the replay socket when idle.
constexpr auto kReplayPollInterval = std::chrono::milliseconds(10);

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  std::unique_ptr<zmq::socket_t> replay;  // ROUTER; null without a replay endpoint
};

StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Create(
    const KvEventPublisherOptions& options, MetricsRegistry* metrics) {
  if (options.buffer_steps < 1) return InvalidArgumentError("kv events: buffer_steps must be >= 1");
  if (options.max_queue_size < 1)
    return InvalidArgumentError("kv events: max_queue_size must be >= 1");
  if (options.hwm < 0) return InvalidArgumentError("kv events: hwm must be >= 0");
  auto sockets = std::make_unique<Sockets>();
  const std::string* current = &options.endpoint;
  try {
    sockets->pub.set(zmq::sockopt::sndhwm, options.hwm);
    sockets->pub.set(zmq::sockopt::linger, 0);
    if (ShouldBind(options.endpoint)) {
      sockets->pub.bind(options.endpoint);
    } else {
      sockets->pub.connect(options.endpoint);
    }
    if (!options.replay_endpoint.empty()) {
      current = &options.replay_endpoint;
      sockets->replay = std::make_unique<zmq::socket_t>(sockets->context, zmq::socket_type::router);
      sockets->replay->set(zmq::sockopt::linger, 0);
      sockets->replay->bind(options.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return InvalidArgumentError("--kv-events-config: cannot open endpoint " + *current + ": " +
                                e.what());
  }
  std::unique_ptr<KvEventPublisher> publisher(
      new KvEventPublisher(options, std::move(sockets), metrics));
  publisher->thread_ = std::thread([p = publisher.get()] { p->Run(); });
  TANDEM_LOG(INFO) << "KV events: publishing on " << options.endpoint
                   << (options.replay_endpoint.empty() ? std::string()
                                                       : ", replay on " + options.replay_endpoint)
                   << ", topic '" << options.topic << "'";
  return publisher;
}

KvEventPublisher::KvEventPublisher(const KvEventPublisherOptions& options,
                                   std::unique_ptr<Sockets> sockets, MetricsRegistry* metrics)
    : options_(options), sockets_(std::move(sockets)) {
  if (metrics != nullptr) {
    sent_counter_ = metrics->GetCounter("tandem_kv_event_batches_published",
                                        "KV event batches sent on the ZMQ PUB socket.");
    dropped_batches_counter_ =
        metrics->GetCounter("tandem_kv_event_batches_dropped",
                            "KV event batches dropped because the publisher queue was full.");
    dropped_events_counter_ = metrics->GetCounter(
        "tandem_kv_events_dropped", "KV events dropped because the publisher queue was full.");
  }
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool KvEventPublisher::Publish(std::string payload, size_t num_events) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t seq = next_seq_++;
    if (!stopping_ && queue_.size() < static_cast<size_t>(options_.max_queue_size)) {
      queue_.push_back(Queued{seq, std::move(payload)});
      cv_.notify_one();
      return true;
    }
  }
  batches_dropped_.fetch_add(1);
  events_dropped_.fetch_add(num_events);
  if (dropped_batches_counter_ != nullptr) dropped_batches_counter_->Add(1);
  if (dropped_events_counter_ != nullptr)
    dropped_events_counter_->Add(static_cast<double>(num_events));
  return false;
}

void KvEventPublisher::Run() {
  std::deque<Queued> batch;
  while (true) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] { return stopping_ || !queue_.empty(); };
      if (sockets_->replay) {
        cv_.wait_for(lock, kReplayPollInterval, ready);
      } else {
        cv_.wait(lock, ready);
      }
      batch.swap(queue_);
      stopping = stopping_;
    }
    for (Queued& q : batch) Send(std::move(q));
    batch.clear();
    if (sockets_->replay) ServeReplayRequests();
    if (stopping) {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
    }
  }
}

void KvEventPublisher::Send(Queued batch) {
  if (options_.fault_send_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.fault_send_delay_ms));
  }
  try {
    const std::string seq = BigEndian8(batch.seq);
    zmq::socket_t& pub = sockets_->pub;
    // PUB never blocks: past hwm, ZMQ drops the message for that subscriber.
    pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub.send(zmq::buffer(seq), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub.send(zmq::buffer(batch.payload), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    TANDEM_LOG(WARNING) << "KV events: send failed: " << e.what();
  }
  batches_sent_.fetch_add(1);
  if (sent_counter_ != nullptr) sent_counter_->Add(1);
  replay_buffer_.emplace_back(batch.seq, std::move(batch.payload));
  while (replay_buffer_.size() > static_cast<size_t>(options_.buffer_steps)) {
    replay_buffer_.pop_front();
  }
}

void KvEventPublisher::ServeReplayRequests() {
  zmq::socket_t& router = *sockets_->replay;
  static const std::string kEndSeq(8, '\xff');  // -1 as 8 signed big-endian bytes
  try {
    while (true) {
      std::vector<zmq::message_t> frames;
      while (true) {
        zmq::message_t frame;
        if (!router.recv(frame, zmq::recv_flags::dontwait)) break;
        const bool more = frame.more();
        frames.push_back(std::move(frame));
        if (!more) break;
      }
      if (frames.empty()) return;
      // [identity, empty delimiter, start_seq]; anything else is not a replay request.
      if (frames.size() != 3 || frames[2].size() != 8) {
        TANDEM_LOG(WARNING) << "KV events: ignoring a malformed replay request of " << frames.size()
                            << " frames";
        continue;
      }
      const uint64_t start = FromBigEndian8(static_cast<const uint8_t*>(frames[2].data()));
      const std::string identity = frames[0].to_string();
      auto reply = [&](const std::string& seq, const std::string& payload) {
        // ROUTER drops what it cannot deliver (peer gone or at its hwm): never blocks.
        router.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        router.send(zmq::const_buffer(nullptr, 0),
                    zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        router.send(zmq::buffer(seq), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        router.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      };
      for (const auto& [seq, payload] : replay_buffer_) {
        if (seq >= start) reply(BigEndian8(seq), payload);
      }
      reply(kEndSeq, std::string());
    }
  } catch (const zmq::error_t& e) {
    TANDEM_LOG(WARNING) << "KV events: replay failed: " << e.what();
  }
}

}  // namespace tandem::net
