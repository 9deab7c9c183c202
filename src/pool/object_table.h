// ObjectTable: the worker's index of objects in its arena — key -> (offset, size), the
// seal state, pins, leases, soft pins, LRU order, and watermark eviction.
//
// Invariants:
//   * An unsealed object is invisible to Lookup/Exists and is never evicted.
//   * A pinned object is never evicted or freed; a sealed object's bytes never change.
//   * A leased object (read within the last `lease_ttl`, as Mooncake Store's read lease)
//     is never evicted, nor spilled; a soft-pinned one only when nothing else can go.
//   * The spill hook sees an evicted object's bytes before its space is freed.
//   * used bytes (allocator) <= capacity; after an allocation that triggered eviction,
//     used bytes are at most the low watermark plus that allocation, unless the rest is
//     pinned or unsealed.
//
// Thread safety: all methods are thread-safe (one mutex; every call is O(log n) except
// eviction, which walks the LRU list).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pool/arena_allocator.h"
#include "pool/wire.h"

namespace tandem::pool {

struct ObjectLocation {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct ObjectTableStats {
  uint64_t objects = 0;  // sealed objects
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t evictions = 0;
  uint64_t pinned = 0;
  uint64_t soft_pinned = 0;
  uint64_t spilled = 0;  // evictions the spill hook took
};

// Called under the table lock for each evicted sealed primary object, with its arena
// location, before the space is freed; true when the object lives on (spilled to disk),
// so its directory entry stays. Must not block and must not call back into the table.
using SpillHook = std::function<bool(const std::string& key, uint64_t offset, uint64_t size)>;

class ObjectTable {
 public:
  // Eviction starts when an allocation would pass high_watermark * capacity and stops
  // at low_watermark * capacity.
  // `lease_ttl`: how long a read keeps an object from eviction (0 = only while pinned).
  ObjectTable(uint64_t capacity_bytes, double high_watermark = 0.9, double low_watermark = 0.8,
              std::chrono::milliseconds lease_ttl = std::chrono::milliseconds(0));
  // Before any allocation.
  void SetSpillHook(SpillHook hook) { spill_hook_ = std::move(hook); }

  // Reserves space for a new unsealed object. `primary`: written by a client here (as
  // opposed to a replica fetched from another worker). Keys of evicted primary objects
  // are appended to `evicted_primaries` (the caller removes their directory entries).
  AllocCode Allocate(const std::string& key, uint64_t size, bool primary, uint64_t* offset,
                     std::vector<std::string>* evicted_primaries);
  // Makes an unsealed object visible. False if `key` is not an unsealed object.
  bool Seal(const std::string& key);
  // Frees an unsealed object (its writer gave up). False if not unsealed.
  bool Abort(const std::string& key);

  // Pins a sealed object, grants it a read lease, refreshes its soft pin, and marks it
  // most recently used.
  std::optional<ObjectLocation> LookupAndPin(const std::string& key);
  // Soft-pins a sealed object: it is evicted only after every unpinned object that is not
  // soft-pinned, until `ttl` passes without a get. False if `key` is not sealed here.
  bool SoftPin(const std::string& key, std::chrono::milliseconds ttl);
  // Drops one pin taken by LookupAndPin. Unknown keys are ignored.
  void Unpin(const std::string& key);
  bool Exists(const std::string& key) const;  // sealed only

  // Keys of all sealed primary objects (for re-publishing directory entries).
  std::vector<std::string> PrimaryKeys() const;
  ObjectTableStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Object {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t pins = 0;
    bool sealed = false;
    bool primary = false;
    Clock::time_point lease_until{};
    Clock::time_point soft_pin_until{};
    std::chrono::milliseconds soft_pin_ttl{0};
    std::list<std::string>::iterator lru;  // valid when sealed
  };

  // Evicts LRU sealed unpinned objects until used + incoming <= target. Precondition: mu_ held.
  void EvictLocked(uint64_t target_used, uint64_t incoming, std::vector<std::string>* evicted);
  void EraseLocked(std::unordered_map<std::string, Object>::iterator it);

  mutable std::mutex mu_;
  ArenaAllocator allocator_;
  const uint64_t high_bytes_;
  const uint64_t low_bytes_;
  const std::chrono::milliseconds lease_ttl_;
  SpillHook spill_hook_;
  std::unordered_map<std::string, Object> objects_;
  std::list<std::string> lru_;  // sealed objects, least recently used first
  uint64_t num_sealed_ = 0;
  uint64_t evictions_ = 0;
  uint64_t spilled_ = 0;
};

}  // namespace tandem::pool
