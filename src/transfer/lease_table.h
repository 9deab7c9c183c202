// LeaseTable: the producer's kept requests — KV blocks kept for a decode instance to
// pull — each under a lease (docs/KV_TRANSFER.md "Leases").
//
// The engine thread keeps and, from TakeFreeable(), frees; transfer-server threads pin a
// lease while they read its blocks (Acquire/Unpin), renew it per frame, and release it
// on DONE; the HTTP abort releases it too. A pinned lease is never handed out for
// freeing, so blocks are never freed under a reader.
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tandem::transfer {

class LeaseTable {
 public:
  using Clock = std::chrono::steady_clock;

  // `on_change` (may be empty) is called, without the table's lock held, after a lease
  // becomes freeable (released, or unpinned after expiry), so the owner can wake up.
  LeaseTable(std::chrono::milliseconds lease, std::chrono::milliseconds hard_cap, std::function<void()> on_change);

  // Starts a lease named `id` over `blocks` (AlreadyExists if it is live).
  // `now` is for tests (a clock they control).
  Status Keep(const std::string& id, std::vector<int32_t> blocks, Clock::time_point now = Clock::now());
  // Pins the lease for one reader and renews it. NotFound for an unknown, released or
  // expired lease; PermissionDenied if a block does not belong to it.
  Status Acquire(const std::string& id, std::span<const int32_t> blocks);
  void Renew(const std::string& id, Clock::time_point now = Clock::now());
  void Unpin(const std::string& id);
  // Ends the lease (DONE or abort). False if it was not live.
  bool Release(const std::string& id);

  // Removes and returns the leases whose blocks may be freed now: released or expired,
  // and not pinned.
  std::vector<std::string> TakeFreeable(Clock::time_point now = Clock::now());
  // The earliest time an unpinned, unreleased lease expires, if any (pinned and
  // released leases are announced through `on_change`).
  std::optional<Clock::time_point> NextDeadline() const;
  size_t size() const;

 private:
  struct Lease {
    std::vector<int32_t> blocks;  // sorted
    Clock::time_point deadline;
    Clock::time_point hard_deadline;
    int pins = 0;
    bool released = false;
  };
  bool LiveLocked(const Lease& lease, Clock::time_point now) const {
    return !lease.released && now < lease.deadline;
  }

  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds hard_cap_;
  const std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Lease> leases_;  // guarded by mu_
};

}  // namespace tandem::transfer
