// KvEventPublisher: vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py) for Tandem's KV
// cache events: a ZMQ PUB socket, a ROUTER socket for replay, a bounded queue and a
// publisher thread. The payloads are already encoded (kv/kv_events.h: one KVEventBatch per
// engine step); this class only sequences, sends, buffers and replays them.
//
// Wire protocol (docs/KV_EVENTS.md), as vLLM's:
//   PUB     every batch is one multipart message [topic, seq, payload]; seq is an 8-byte
//           big-endian unsigned sequence number, 0 for the first batch, +1 per batch.
//   replay  a client (DEALER, or REQ) sends [start_seq] (8 bytes big-endian) to the ROUTER;
//           the publisher answers, for every buffered batch with seq >= start_seq in order,
//           [seq, payload], and then the end marker [-1 as 8 signed big-endian bytes
//           (ff x 8), empty payload]. (ROUTER frames add the identity and an empty
//           delimiter in front.) The buffer holds the last buffer_steps batches sent.
//
// Never blocking the engine: Publish() only appends to a queue of at most max_queue_size
// batches under a short lock; when the queue is full the batch is dropped and counted
// (/metrics: tandem_kv_events_dropped_total in events, tandem_kv_event_batches_dropped_total
// in batches; tandem_kv_event_batches_published_total counts the sent ones). A dropped batch
// still takes its sequence number, so subscribers see the gap (and replay cannot fill it)
// instead of silently missing events. The PUB socket never blocks either: ZMQ drops messages
// for a subscriber that is hwm messages behind. (vLLM's queue blocks the engine when full;
// Tandem drops instead.)
//
// Thread safety: Publish() may be called from any thread (the engine's); the sockets are
// used only by the publisher thread after Create() returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/status.h"

namespace tandem {
class Counter;
class MetricsRegistry;
}  // namespace tandem

namespace tandem::net {

struct KvEventPublisherOptions {
  std::string endpoint = "tcp://*:5557";  // bound if it has "*", "::", ipc://, inproc://;
                                          // else connected (vLLM's rule)
  std::string replay_endpoint;            // ROUTER, bound; empty = no replay
  int buffer_steps = 10000;               // batches kept for replay (>= 1)
  int hwm = 100000;                       // PUB send high-water mark (0 = none)
  int max_queue_size = 100000;            // batches waiting to be sent (>= 1)
  std::string topic;
  // TEST ONLY fault injection (env TANDEM_FAULT_KV_EVENTS_SEND_DELAY_MS in `tandem serve`):
  // the publisher thread sleeps this long before each send, as on a stalled network, so
  // tests can fill the queue and watch the engine carry on.
  int fault_send_delay_ms = 0;
};

class KvEventPublisher {
 public:
  // Opens and binds (or connects) the sockets and starts the publisher thread.
  // InvalidArgument naming the endpoint when a socket cannot bind or the endpoint is
  // malformed. `metrics` (may be null) receives the counters; it must outlive this.
  static StatusOr<std::unique_ptr<KvEventPublisher>> Create(const KvEventPublisherOptions& options,
                                                            MetricsRegistry* metrics);
  // Sends what is still queued (PUB never blocks, so this is quick), then closes.
  ~KvEventPublisher();

  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues one encoded batch holding `num_events` events. Never blocks on I/O. Returns
  // false, counting the drop, when the queue is full.
  bool Publish(std::string payload, size_t num_events);

  uint64_t batches_sent() const { return batches_sent_.load(); }
  uint64_t batches_dropped() const { return batches_dropped_.load(); }
  uint64_t events_dropped() const { return events_dropped_.load(); }

 private:
  struct Sockets;  // the ZMQ context and sockets (keeps zmq.hpp out of this header)
  struct Queued {
    uint64_t seq;
    std::string payload;
  };

  KvEventPublisher(const KvEventPublisherOptions& options, std::unique_ptr<Sockets> sockets,
                   MetricsRegistry* metrics);
  void Run();                  // the publisher thread
  void Send(Queued batch);     // PUB + replay buffer
  void ServeReplayRequests();  // answers every waiting replay request

  const KvEventPublisherOptions options_;
  std::unique_ptr<Sockets> sockets_;
  std::deque<std::pair<uint64_t, std::string>> replay_buffer_;  // publisher thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // guarded by mu_; at most options_.max_queue_size
  uint64_t next_seq_ = 0;     // guarded by mu_
  bool stopping_ = false;     // guarded by mu_

  std::atomic<uint64_t> batches_sent_{0};
  std::atomic<uint64_t> batches_dropped_{0};
  std::atomic<uint64_t> events_dropped_{0};
  Counter* sent_counter_ = nullptr;  // may be null
  Counter* dropped_batches_counter_ = nullptr;
  Counter* dropped_events_counter_ = nullptr;
  std::thread thread_;
};

}  // namespace tandem::net
