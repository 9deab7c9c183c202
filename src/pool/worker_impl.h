// Internal to the pool worker: the state shared by pool_worker.cc (lifecycle, accept
// loops, background threads) and worker_session.cc (one connection's requests).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/metrics.h"
#include "etcd/etcd_client.h"
#include "net/http_server.h"
#include "net/socket_connection.h"
#include "net/socket_listener.h"
#include "pool/directory.h"
#include "pool/disk_tier.h"
#include "pool/frame_io.h"
#include "pool/membership.h"
#include "pool/object_table.h"
#include "pool/peer_client.h"
#include "pool/pool_worker.h"
#include "pool/shm_arena.h"

namespace tandem::pool {

struct WorkerMetrics {
  explicit WorkerMetrics(MetricsRegistry* r);
  Gauge* objects;
  Gauge* bytes;
  Gauge* capacity;
  Counter* hits_local;
  Counter* hits_remote;
  Counter* misses;
  Counter* puts;
  Counter* evictions;
  Counter* remote_gets;
  Counter* remote_get_failures;
  Gauge* etcd_up;
  Gauge* ring_workers;
  Gauge* connections;
  Gauge* pinned;
  Gauge* soft_pinned;
  // Per tier (memory = the arena, disk = the spill directory).
  Counter* hits_disk;
  Gauge* tier_objects[2];
  Gauge* tier_bytes[2];
  Gauge* tier_capacity[2];
  Counter* tier_hits[2];
  Counter* tier_misses[2];
  Gauge* spill_queue_bytes;
  Counter* spills;
  Counter* spill_drops;
  Counter* promotions;
  Counter* disk_evictions;
  Counter* disk_corrupt;
  Counter* disk_write_bytes;
  Counter* disk_read_bytes;
};
enum Tier { kMemoryTier = 0, kDiskTier = 1 };

class PoolWorker::Impl {
 public:
  explicit Impl(WorkerConfig config);
  ~Impl();
  Status Start();
  void Stop();
  uint16_t metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

  // --- used by sessions (worker_session.cc) ---
  // Serves one connection until it closes. `is_unix`: a local client endpoint.
  void ServeConnection(net::SocketConnection& conn, bool is_unix);
  const WorkerConfig& config() const { return config_; }

 private:
  struct Connection {
    std::unique_ptr<net::SocketConnection> conn;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  struct DirOp {
    bool put;  // false = delete
    std::string key;
  };

  void AcceptLoop(net::SocketListener& listener);
  void ReapConnections(bool all);
  void PublisherLoop();
  void LivenessLoop();
  void WriteLiveness();
  void UpdateGauges();
  void OnRingChange(std::shared_ptr<const HashRing> ring);
  void QueueDirOps(bool put, const std::vector<std::string>& keys);

  // Request handlers (worker_session.cc); each returns the response body or an error.
  struct Session;
  StatusOr<std::string> Handle(Session& s, MsgType type, std::string_view body);
  StatusOr<std::string> HandleExist(std::string_view body);
  StatusOr<std::string> HandlePutAlloc(Session& s, std::string_view body);
  StatusOr<std::string> HandlePutSeal(Session& s, std::string_view body);
  StatusOr<std::string> HandleGet(Session& s, std::string_view body);
  StatusOr<std::string> HandleRelease(Session& s, std::string_view body);
  // FETCH is answered here, straight from the arena (writev), not through Handle().
  Status ServeFetch(net::SocketConnection& conn, uint64_t request_id, std::string_view body);
  StatusOr<std::string> HandleDirPut(std::string_view body, bool put);
  StatusOr<std::string> HandleDirLookup(std::string_view body);
  // For keys not held here: a live holder other than this worker, or "" (asks owners).
  std::vector<std::string> FindRemoteHolders(const std::vector<std::string>& keys);
  // Fetches `keys` from `holder` into the arena as replicas; returns which succeeded.
  std::vector<bool> FetchReplicas(const std::string& holder, const std::vector<std::string>& keys);
  void ReleaseSession(Session& s);
  // Reads `key` from the disk tier into the arena (a primary, sealed). False when it is
  // not on disk, its file is bad, or the arena has no room now.
  bool PromoteFromDisk(const std::string& key, std::vector<std::string>* evicted);
  bool HeldHere(const std::string& key) const {
    return table_->Exists(key) || (disk_ && disk_->Contains(key));
  }
  StatusOr<std::string> HandleSoftPin(std::string_view body);

  const WorkerConfig config_;
  std::string self_;  // worker address
  std::unique_ptr<ShmArena> arena_;
  std::unique_ptr<ObjectTable> table_;
  std::unique_ptr<DiskTier> disk_;  // null without --spill_directory
  Directory directory_;
  std::unique_ptr<PeerClient> peers_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::unique_ptr<Membership> membership_;
  MetricsRegistry registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<net::HttpServer> metrics_server_;

  std::unique_ptr<net::SocketListener> tcp_listener_;
  std::unique_ptr<net::SocketListener> unix_listener_;
  std::vector<std::thread> threads_;

  std::mutex conn_mu_;
  std::list<std::unique_ptr<Connection>> connections_;

  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::deque<DirOp> dir_ops_;
  bool republish_all_ = false;
};

}  // namespace tandem::pool
