#include "transfer/lease_table.h"

#include <algorithm>

namespace tandem::transfer {

LeaseTable::LeaseTable(std::chrono::milliseconds lease, std::chrono::milliseconds hard_cap,
                       std::function<void()> on_change)
    : lease_(lease), hard_cap_(std::max(hard_cap, lease)), on_change_(std::move(on_change)) {}

Status LeaseTable::Keep(const std::string& id, std::vector<int32_t> blocks, Clock::time_point now) {
  std::sort(blocks.begin(), blocks.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (leases_.count(id)) return AlreadyExistsError("a KV lease named " + id + " exists");
  Lease& l = leases_[id];
  l.blocks = std::move(blocks);
  l.hard_deadline = now + hard_cap_;
  l.deadline = std::min(now + lease_, l.hard_deadline);
  return Status::Ok();
}

Status LeaseTable::Acquire(const std::string& id, std::span<const int32_t> blocks) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end() || !LiveLocked(it->second, now)) {
    return NotFoundError("no live KV lease for request " + id + " (expired, released or never kept)");
  }
  Lease& l = it->second;
  for (int32_t b : blocks) {
    if (!std::binary_search(l.blocks.begin(), l.blocks.end(), b)) {
      return PermissionDeniedError("block " + std::to_string(b) + " does not belong to request " + id);
    }
  }
  ++l.pins;
  l.deadline = std::min(now + lease_, l.hard_deadline);
  return Status::Ok();
}

void LeaseTable::Renew(const std::string& id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(id);
  if (it != leases_.end() && LiveLocked(it->second, now)) {
    it->second.deadline = std::min(now + lease_, it->second.hard_deadline);
  }
}

void LeaseTable::Unpin(const std::string& id) {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end() || it->second.pins == 0) return;
    --it->second.pins;
    notify = it->second.pins == 0 && !LiveLocked(it->second, Clock::now());
  }
  if (notify && on_change_) on_change_();
}

bool LeaseTable::Release(const std::string& id) {
  bool was_live = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end()) return false;
    was_live = LiveLocked(it->second, Clock::now());
    it->second.released = true;
  }
  if (on_change_) on_change_();
  return was_live;
}

std::vector<std::string> LeaseTable::TakeFreeable(Clock::time_point now) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.pins == 0 && !LiveLocked(it->second, now)) {
      out.push_back(it->first);
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<LeaseTable::Clock::time_point> LeaseTable::NextDeadline() const {
  std::optional<Clock::time_point> next;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, l] : leases_) {
    // A pinned or released lease is handed over through on_change instead.
    if (l.pins > 0 || l.released) continue;
    if (!next || l.deadline < *next) next = l.deadline;
  }
  return next;
}

size_t LeaseTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leases_.size();
}

}  // namespace tandem::transfer
