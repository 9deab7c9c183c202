// Membership: this worker's registration in etcd and its view of the others
// (docs/POOL.md "etcd key schema").
//
// Registers /tandem/pool/workers/<addr> under a lease of node_timeout_s, renewed every
// second (re-registered when the lease is lost, e.g. etcd restarted with fresh data);
// watches the prefix (with re-listing) to learn the other workers. A worker whose key
// vanished stays in the ring for node_dead_timeout_s, then leaves it. While etcd is
// unreachable the last view is kept. This worker is always a member of its own ring.
//
// Thread safety: all methods are thread-safe. on_ring_change runs on the membership
// thread and must not block for long.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "etcd/etcd_client.h"
#include "etcd/prefix_watcher.h"
#include "pool/hash_ring.h"

namespace tandem::pool {

inline constexpr char kWorkersPrefix[] = "/tandem/pool/workers/";

struct MembershipOptions {
  std::string self_address;  // "IP:PORT"
  int64_t node_timeout_s = 30;
  int64_t node_dead_timeout_s = 60;
  uint64_t capacity_bytes = 0;  // advertised in the value
  std::chrono::milliseconds keepalive_interval{1000};
  std::chrono::milliseconds relist_interval{5000};
};

class Membership {
 public:
  // `etcd` is borrowed and must outlive this object.
  Membership(etcd::EtcdClient* etcd, MembershipOptions options,
             std::function<void(std::shared_ptr<const HashRing>)> on_ring_change);
  ~Membership();  // Stop(false)

  // Registers (retrying until `timeout`) and starts the keep-alive and watch threads.
  // Unavailable when etcd could not be reached in time.
  Status Start(std::chrono::milliseconds timeout);
  // Stops the threads; with `revoke`, revokes the lease so the key disappears at once.
  void Stop(bool revoke);

  std::shared_ptr<const HashRing> ring() const;
  // Whether `address` currently has its key in etcd (or is this worker).
  bool IsLive(const std::string& address) const;
  bool etcd_up() const { return etcd_up_.load(); }

 private:
  Status Register();
  void Loop();
  void Recompute();  // from the watcher's snapshot and the dead timeouts

  etcd::EtcdClient* etcd_;
  const MembershipOptions options_;
  const std::string self_key_;
  std::function<void(std::shared_ptr<const HashRing>)> on_ring_change_;
  std::unique_ptr<etcd::PrefixWatcher> watcher_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool snapshot_changed_ = false;
  int64_t lease_id_ = 0;
  std::set<std::string> live_;                 // addresses whose key is in etcd
  std::map<std::string, std::string> values_;  // address -> last registration value
  std::map<std::string, std::chrono::steady_clock::time_point> absent_since_;
  std::shared_ptr<const HashRing> ring_;
  std::atomic<bool> etcd_up_{false};
  std::thread thread_;
};

}  // namespace tandem::pool
