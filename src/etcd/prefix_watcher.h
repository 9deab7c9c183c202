// PrefixWatcher: keeps an up-to-date copy of every key under a prefix, from a watch
// backed by periodic re-listing, so a missed event (etcd restarted, connection dropped,
// revision compacted) heals within one `relist_interval`.
//
// on_change receives the whole snapshot after each change (a key added, changed or
// removed); it runs on the watcher's thread or an etcd client thread, one call at a
// time, and must not block.
//
// Thread safety: Start/Stop from one controlling thread; snapshot() and healthy() from
// any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcd/etcd_client.h"

namespace tandem::etcd {

class PrefixWatcher {
 public:
  using Snapshot = std::map<std::string, std::string>;  // key -> value

  // `client` is borrowed and must outlive the watcher.
  PrefixWatcher(EtcdClient* client, std::string prefix, std::chrono::milliseconds relist_interval,
                std::function<void(const Snapshot&)> on_change);
  ~PrefixWatcher();  // Stop()s
  PrefixWatcher(const PrefixWatcher&) = delete;
  PrefixWatcher& operator=(const PrefixWatcher&) = delete;

  void Start();
  void Stop();  // idempotent; no on_change runs after it returns

  Snapshot snapshot() const;
  // Whether the last list succeeded and the watch is open.
  bool healthy() const;
  // Asks for a re-list now (e.g. after this process changed a key and wants it seen).
  void RelistSoon();

 private:
  void Loop();
  void OnEvents(const std::vector<WatchEvent>& events);
  void OnClosed(const Status& status);
  void Notify(std::unique_lock<std::mutex>& lock);

  EtcdClient* client_;
  const std::string prefix_;
  const std::chrono::milliseconds relist_interval_;
  std::function<void(const Snapshot&)> on_change_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool relist_now_ = true;
  bool listed_ok_ = false;
  bool watch_open_ = false;
  int64_t revision_ = 0;  // the revision snapshot_ reflects
  Snapshot snapshot_;
  std::mutex notify_mu_;              // one on_change at a time
  std::unique_ptr<EtcdWatch> watch_;  // touched only by Loop()/Stop()
  std::thread thread_;
};

}  // namespace tandem::etcd
