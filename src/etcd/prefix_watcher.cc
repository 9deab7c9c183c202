#include "etcd/prefix_watcher.h"

#include "common/logging.h"

namespace tandem::etcd {

PrefixWatcher::PrefixWatcher(EtcdClient* client, std::string prefix,
                             std::chrono::milliseconds relist_interval,
                             std::function<void(const Snapshot&)> on_change)
    : client_(client),
      prefix_(std::move(prefix)),
      relist_interval_(relist_interval),
      on_change_(std::move(on_change)) {}

PrefixWatcher::~PrefixWatcher() { Stop(); }

void PrefixWatcher::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void PrefixWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  watch_.reset();  // after this no watch callback runs
}

PrefixWatcher::Snapshot PrefixWatcher::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

bool PrefixWatcher::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listed_ok_ && watch_open_;
}

void PrefixWatcher::RelistSoon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    relist_now_ = true;
  }
  cv_.notify_all();
}

void PrefixWatcher::Notify(std::unique_lock<std::mutex>& lock) {
  Snapshot copy = snapshot_;
  lock.unlock();
  {
    std::lock_guard<std::mutex> nlock(notify_mu_);
    if (on_change_) on_change_(copy);
  }
  lock.lock();
}

void PrefixWatcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!watch_open_ && watch_) {
      lock.unlock();
      watch_.reset();  // a closed watch; its callbacks are silenced
      lock.lock();
    }
    lock.unlock();
    auto listed = client_->RangePrefix(prefix_);
    lock.lock();
    if (stop_) break;
    relist_now_ = false;
    if (!listed.ok()) {
      if (listed_ok_)
        TANDEM_LOG(WARNING) << "etcd list " << prefix_ << ": " << listed.status().ToString();
      listed_ok_ = false;
    } else {
      if (!listed_ok_) TANDEM_LOG(INFO) << "etcd list " << prefix_ << ": ok";
      listed_ok_ = true;
      Snapshot fresh;
      for (auto& kv : listed->kvs) fresh[kv.key] = kv.value;
      bool changed = fresh != snapshot_;
      if (listed->revision >= revision_ || changed) {
        revision_ = listed->revision;
        snapshot_ = std::move(fresh);
      }
      if (!watch_open_) {
        int64_t from = revision_ + 1;
        watch_open_ = true;  // before Watch(): its on_closed may run before Watch returns
        lock.unlock();
        WatchCallbacks cb;
        cb.on_events = [this](const std::vector<WatchEvent>& events, int64_t) { OnEvents(events); };
        cb.on_closed = [this](Status status) { OnClosed(status); };
        auto watch = client_->Watch(prefix_, EtcdClient::PrefixEnd(prefix_), from, std::move(cb));
        lock.lock();
        if (watch.ok()) {
          watch_ = std::move(watch).value();
        } else {
          watch_open_ = false;
        }
      }
      if (changed) Notify(lock);
    }
    // Unhealthy: retry every second; healthy: re-list every interval.
    auto wait = listed_ok_ && watch_open_ ? relist_interval_ : std::chrono::milliseconds(1000);
    cv_.wait_for(lock, wait, [this] { return stop_ || relist_now_; });
  }
}

void PrefixWatcher::OnEvents(const std::vector<WatchEvent>& events) {
  std::unique_lock<std::mutex> lock(mu_);
  bool changed = false;
  for (const auto& e : events) {
    // A re-list may already reflect this event (or a later one): skip stale events.
    if (e.kv.mod_revision != 0 && e.kv.mod_revision <= revision_) continue;
    if (e.type == WatchEvent::Type::kPut) {
      auto [it, inserted] = snapshot_.try_emplace(e.kv.key, e.kv.value);
      if (!inserted && it->second != e.kv.value) it->second = e.kv.value, changed = true;
      changed |= inserted;
    } else {
      changed |= snapshot_.erase(e.kv.key) > 0;
    }
    if (e.kv.mod_revision > revision_) revision_ = e.kv.mod_revision;
  }
  if (changed && !stop_) Notify(lock);
}

void PrefixWatcher::OnClosed(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (watch_open_)
      TANDEM_LOG(WARNING) << "etcd watch " << prefix_ << " closed: " << status.ToString();
    watch_open_ = false;
    relist_now_ = true;
  }
  cv_.notify_all();
}

}  // namespace tandem::etcd
