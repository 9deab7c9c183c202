// KvEventsConfig: `tandem serve --kv-events-config JSON`, read as vLLM reads its
// KVEventsConfig (vllm/config/kv_events.py): the same keys, defaults and meaning.
//
//   {"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557",
//    "replay_endpoint": "tcp://*:5558", "buffer_steps": 10000, "hwm": 100000,
//    "max_queue_size": 100000, "topic": "kv-events"}
//
// publisher defaults to "zmq" when enable_kv_cache_events is true, else "null" (no events).
// Tandem is stricter than vLLM in two places, both reported as InvalidArgument naming the
// key: unknown keys are rejected (a typo must not silently disable events), and
// max_queue_size must be >= 1 (vLLM's 0 means an unbounded queue; Tandem never lets a slow
// consumer grow engine memory without bound).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>

#include "common/status.h"

namespace tandem::net {

struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  std::string publisher = "null";         // "zmq" | "null"
  std::string endpoint = "tcp://*:5557";  // PUB socket: bound if it has "*", "::", ipc://,
                                          // inproc://; else connected (vLLM's rule)
  std::string replay_endpoint;            // ROUTER socket, always bound; empty = none
  int buffer_steps = 10000;               // batches kept for replay
  int hwm = 100000;                       // ZMQ send high-water mark (0 = no limit)
  int max_queue_size = 100000;            // batches waiting for the publisher thread
  std::string topic;                      // first frame of every message

  // True when events are published (enabled and publisher "zmq").
  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};

// Parses the flag's JSON. InvalidArgument ("--kv-events-config: ...") for malformed JSON,
// a non-object, an unknown key, a value of the wrong type or range, or an unknown publisher.
StatusOr<KvEventsConfig> ParseKvEventsConfig(const std::string& json_text);

// vLLM's ZmqEventPublisher.offset_endpoint_port: with data-parallel rank r > 0, a tcp
// endpoint's port grows by r and an inproc name gains "_dp<r>", so ranks on one host do not
// collide. Rank 0 and empty endpoints are returned unchanged. InvalidArgument for another
// transport with r > 0, or a tcp endpoint whose port is not a number (or overflows 65535).
StatusOr<std::string> OffsetEndpointPort(const std::string& endpoint, int data_parallel_rank);

}  // namespace tandem::net
