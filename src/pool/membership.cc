#include "pool/membership.h"

#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/logging.h"

namespace tandem::pool {

Membership::Membership(etcd::EtcdClient* etcd, MembershipOptions options,
                       std::function<void(std::shared_ptr<const HashRing>)> on_ring_change)
    : etcd_(etcd),
      options_(std::move(options)),
      self_key_(std::string(kWorkersPrefix) + options_.self_address),
      on_ring_change_(std::move(on_ring_change)),
      ring_(std::make_shared<HashRing>(std::vector<std::string>{options_.self_address})) {}

Membership::~Membership() { Stop(false); }

Status Membership::Register() {
  auto lease = etcd_->LeaseGrant(options_.node_timeout_s);
  if (!lease.ok()) return lease.status();
  nlohmann::json value = {{"address", options_.self_address},
                          {"pid", static_cast<int64_t>(getpid())},
                          {"start_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()},
                          {"capacity_bytes", options_.capacity_bytes},
                          {"version", 1}};
  auto put = etcd_->Put(self_key_, value.dump(), *lease);
  if (!put.ok()) return put.status();
  std::lock_guard<std::mutex> lock(mu_);
  lease_id_ = *lease;
  TANDEM_LOG(INFO) << "registered " << self_key_ << " with lease " << *lease << " (TTL "
                   << options_.node_timeout_s << " s)";
  return Status::Ok();
}

Status Membership::Start(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Status s = Register();
  while (!s.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s = Register();
  }
  if (!s.ok()) return UnavailableError("cannot register in etcd: " + s.message());
  etcd_up_ = true;
  watcher_ = std::make_unique<etcd::PrefixWatcher>(etcd_, kWorkersPrefix, options_.relist_interval,
                                                   [this](const etcd::PrefixWatcher::Snapshot&) {
                                                     {
                                                       std::lock_guard<std::mutex> lock(mu_);
                                                       snapshot_changed_ = true;
                                                     }
                                                     cv_.notify_all();
                                                   });
  watcher_->Start();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Membership::Stop(bool revoke) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (watcher_) watcher_->Stop();
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = lease_id_;
  }
  if (revoke && lease != 0) {
    Status s = etcd_->LeaseRevoke(lease);
    if (!s.ok())
      TANDEM_LOG(WARNING) << "revoking lease: " << s.ToString();
    else
      TANDEM_LOG(INFO) << "left etcd (lease revoked)";
  }
}

std::shared_ptr<const HashRing> Membership::ring() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ring_;
}

bool Membership::IsLive(const std::string& address) const {
  if (address == options_.self_address) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return live_.count(address) != 0;
}

void Membership::Recompute() {
  auto snapshot = watcher_->snapshot();
  auto now = std::chrono::steady_clock::now();
  std::shared_ptr<const HashRing> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> live;
    for (const auto& [key, value] : snapshot) live.insert(key.substr(std::strlen(kWorkersPrefix)));
    for (const auto& addr : live_) {
      if (live.count(addr) == 0 && absent_since_.count(addr) == 0) {
        TANDEM_LOG(WARNING) << "pool worker " << addr << " left etcd; leaves the ring in "
                            << options_.node_dead_timeout_s << " s unless it returns";
        absent_since_[addr] = now;
      }
    }
    bool rejoined = false;
    for (const auto& [key, value] : snapshot) {
      std::string addr = key.substr(std::strlen(kWorkersPrefix));
      if (absent_since_.erase(addr) > 0 || live_.count(addr) == 0) {
        TANDEM_LOG(INFO) << "pool worker " << addr << " is live";
      }
      // A restarted worker (new registration value) lost the directory entries it
      // owned: treat it as a ring change so everyone re-announces their keys.
      auto old = values_.find(addr);
      if (old != values_.end() && old->second != value && addr != options_.self_address)
        rejoined = true;
      values_[addr] = value;
    }
    live_ = std::move(live);
    std::vector<std::string> members(live_.begin(), live_.end());
    members.push_back(options_.self_address);
    for (auto it = absent_since_.begin(); it != absent_since_.end();) {
      if (now - it->second >= std::chrono::seconds(options_.node_dead_timeout_s)) {
        TANDEM_LOG(WARNING) << "pool worker " << it->first << " is dead; removed from the ring";
        it = absent_since_.erase(it);
      } else {
        members.push_back(it->first);
        ++it;
      }
    }
    auto ring = std::make_shared<HashRing>(std::move(members));
    if (ring->members() != ring_->members()) {
      ring_ = ring;
      changed = ring;
    } else if (rejoined) {
      changed = ring_;
    }
  }
  if (changed && on_ring_change_) on_ring_change_(changed);
}

void Membership::Loop() {
  auto next_keepalive = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    auto now = std::chrono::steady_clock::now();
    if (now >= next_keepalive) {
      next_keepalive = now + options_.keepalive_interval;
      int64_t lease = lease_id_;
      lock.unlock();
      Status s;
      if (lease == 0) {
        s = Register();
      } else {
        auto ttl = etcd_->LeaseKeepAlive(lease);
        s = ttl.status();
        if (s.code() == StatusCode::kNotFound) {
          // etcd forgot the lease (it expired while we were cut off, or etcd lost its
          // data): our key is gone, so register again at once.
          TANDEM_LOG(WARNING) << "etcd lease " << lease << " lost; registering again";
          s = Register();
        } else if (s.ok() && watcher_->healthy()) {
          // The key itself may have been deleted while the lease lives on.
          auto snap = watcher_->snapshot();
          if (snap.count(self_key_) == 0) {
            auto got = etcd_->Range(self_key_, "");
            if (got.ok() && got->kvs.empty()) s = Register();
          }
        }
      }
      if (s.ok() != etcd_up_.load()) {
        if (s.ok())
          TANDEM_LOG(INFO) << "etcd reachable again";
        else
          TANDEM_LOG(WARNING) << "etcd unreachable: " << s.ToString();
      }
      etcd_up_ = s.ok();
      lock.lock();
      if (s.code() == StatusCode::kNotFound) lease_id_ = 0;
    }
    snapshot_changed_ = false;
    lock.unlock();
    Recompute();
    lock.lock();
    cv_.wait_until(lock, next_keepalive, [this] { return stop_ || snapshot_changed_; });
  }
}

}  // namespace tandem::pool
