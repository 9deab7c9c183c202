// PoolWorker: one node's KV-cache pool daemon (`tandem pool run|start`): the shared-memory
// arena and its object table, the Unix-socket endpoint for local clients, the TCP
// endpoint for other workers, etcd membership, the directory entries it owns, the
// liveness file and /metrics. See docs/POOL.md for the protocol.
//
// Concurrency: one thread per connection (clients and peers are few: engines on this
// node and the other workers), so a slow remote get delays only the connection that
// asked; plus an accept thread per endpoint, a directory publisher, the liveness
// thread, the membership threads and the metrics HTTP server.
//
// Thread safety: Start/Stop/Wait from one controlling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tandem::pool {

struct WorkerConfig {
  std::string worker_address;  // "IP:PORT": TCP bind address and identity
  std::string etcd_address;    // "IP:PORT[,IP:PORT]"
  uint64_t shared_memory_mb = 1024;
  int64_t node_timeout_s = 30;
  int64_t node_dead_timeout_s = 60;
  std::string liveness_check_path;  // empty = none
  bool enable_huge_tlb = false;
  std::string auth_token;  // empty = no authentication
  int metrics_port = -1;   // -1 = worker port + 1; 0 = off
  size_t max_connections = 1024;
  // Arena eviction (Mooncake Store's names): starts when an allocation would pass
  // high * size and frees eviction_ratio * size.
  double eviction_high_watermark_ratio = 0.9;
  double eviction_ratio = 0.1;
  // A read keeps its object this long after the GET, released or not. The GET's pin is
  // the lease of a read in flight (held until RELEASE); Mooncake's 5 s time lease exists
  // because its readers do not pin. Default 0: at 1000 ms a small arena lost hits
  // (docs/PERFORMANCE.md "KV pool disk tier").
  int64_t default_kv_lease_ttl_ms = 0;
  int64_t default_kv_soft_pin_ttl_ms = 30 * 60 * 1000;  // a soft pin lasts this long unread
  // Disk tier (openYuanrong's names): empty = none. 0 = 95 % of the free space.
  std::string spill_directory;
  uint64_t spill_size_limit = 0;  // bytes
  std::chrono::milliseconds etcd_start_timeout{10000};
};

// The smallest --spill_size_limit accepted (smaller holds no useful object).
constexpr uint64_t kMinSpillSizeLimit = 64 << 10;

// InvalidArgument naming the first bad field.
Status ValidateWorkerConfig(const WorkerConfig& config);

class PoolWorker {
 public:
  explicit PoolWorker(WorkerConfig config);
  ~PoolWorker();  // Stop()s
  PoolWorker(const PoolWorker&) = delete;
  PoolWorker& operator=(const PoolWorker&) = delete;

  // Maps the arena, binds both endpoints and the metrics port, registers in etcd and
  // starts serving. On error nothing keeps running.
  Status Start();
  // Graceful: leaves etcd (revokes the lease), closes every connection, joins threads.
  void Stop();

  uint16_t metrics_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::pool
