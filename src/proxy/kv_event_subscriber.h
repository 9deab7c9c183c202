// KvEventSubscriber: follows the KV-event streams of the routed instances (one ZMQ SUB
// socket each, on one thread) and keeps a PrefixIndex true to them.
//
// Each source is an instance's publisher endpoint (`tandem serve --kv-events-config`'s
// or vLLM's), e.g. tcp://127.0.0.1:5557, a topic filter ("" = every topic) and
// optionally its replay endpoint (the publisher's ROUTER socket).
// Messages are [topic, seq (8 bytes big-endian), payload] (see kv_event_batch.h).
// The index never keeps data the subscriber cannot vouch for. It drops an instance's
// entries (PrefixIndex::DropInstance) when
//   * a sequence number is skipped (PUB dropped messages: removals may be lost) and the
//     missed batches cannot be replayed (no replay endpoint, or it does not answer them
//     all within a second; this thread waits for it), or the number goes back (the
//     publisher restarted, with an empty cache);
//   * a message cannot be decoded;
//   * `is_up(instance)` turns false (the proxy marked the instance down: its process
//     may be gone, and its cache with it);
//   * the instance was sent work that must store blocks (ExpectEvents) and no event has
//     arrived for `silence_timeout` since (its publisher is stuck or its events are
//     lost).
// After a drop the index fills again from the events that follow; everything it holds
// was announced after the drop, so a stale entry is never used for routing.
//
// Thread safety: Start/Stop from one controlling thread; ExpectEvents from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "proxy/prefix_index.h"

namespace tandem::proxy {

struct KvEventSource {
  int instance = 0;             // the PrefixIndex instance id
  std::string name;             // for logs and metrics (the instance's host:port)
  std::string endpoint;         // ZMQ endpoint to connect, e.g. tcp://127.0.0.1:5557
  std::string topic;            // subscription prefix ("" = all)
  std::string replay_endpoint;  // the publisher's replay (ROUTER) endpoint; "" = none
};

struct KvEventSubscriberOptions {
  std::vector<KvEventSource> sources;
  std::chrono::milliseconds silence_timeout{30'000};
  std::chrono::milliseconds poll_interval{100};  // liveness checks run this often
  // Whether the proxy considers the instance up; may be empty (always up).
  std::function<bool(int instance)> is_up;
};

class KvEventSubscriber {
 public:
  // Connects the sockets (ZMQ connects lazily: a publisher that is not there yet is
  // joined when it appears). InvalidArgument for a malformed endpoint. Borrows `index`
  // and `metrics` (may be null), which must outlive the subscriber.
  static StatusOr<std::unique_ptr<KvEventSubscriber>> Create(KvEventSubscriberOptions options,
                                                             PrefixIndex* index,
                                                             MetricsRegistry* metrics);
  ~KvEventSubscriber();  // Stop()s

  void Start();
  void Stop();  // idempotent; joins the thread

  // Work that will store at least one block was sent to `instance` now: if no event
  // arrives from it within silence_timeout, its entries are dropped.
  void ExpectEvents(int instance);

 private:
  struct Impl;
  explicit KvEventSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::proxy
