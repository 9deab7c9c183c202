// ObjectTable: the worker's index of objects in its arena — key -> (offset, size), the
// seal state, pins, LRU order, and watermark eviction.
//
// Invariants:
//   * An unsealed object is invisible to Lookup/Exists and is never evicted.
//   * A pinned object is never evicted or freed; a sealed object's bytes never change.
//   * used bytes (allocator) <= capacity; after an allocation that triggered eviction,
//     used bytes are at most the low watermark plus that allocation, unless the rest is
//     pinned or unsealed.
//
// Thread safety: all methods are thread-safe (one mutex; every call is O(log n) except
// eviction, which walks the LRU list).
#pragma once

#include <cstdint>
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
};

class ObjectTable {
 public:
  // Eviction starts when an allocation would pass high_watermark * capacity and stops
  // at low_watermark * capacity.
  ObjectTable(uint64_t capacity_bytes, double high_watermark = 0.9, double low_watermark = 0.8);

  // Reserves space for a new unsealed object. `primary`: written by a client here (as
  // opposed to a replica fetched from another worker). Keys of evicted primary objects
  // are appended to `evicted_primaries` (the caller removes their directory entries).
  AllocCode Allocate(const std::string& key, uint64_t size, bool primary, uint64_t* offset,
                     std::vector<std::string>* evicted_primaries);
  // Makes an unsealed object visible. False if `key` is not an unsealed object.
  bool Seal(const std::string& key);
  // Frees an unsealed object (its writer gave up). False if not unsealed.
  bool Abort(const std::string& key);

  // Pins a sealed object and marks it most recently used.
  std::optional<ObjectLocation> LookupAndPin(const std::string& key);
  // Drops one pin taken by LookupAndPin. Unknown keys are ignored.
  void Unpin(const std::string& key);
  bool Exists(const std::string& key) const;  // sealed only

  // Keys of all sealed primary objects (for re-publishing directory entries).
  std::vector<std::string> PrimaryKeys() const;
  ObjectTableStats stats() const;

 private:
  struct Object {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t pins = 0;
    bool sealed = false;
    bool primary = false;
    std::list<std::string>::iterator lru;  // valid when sealed
  };

  // Evicts LRU sealed unpinned objects until used + incoming <= target. Precondition: mu_ held.
  void EvictLocked(uint64_t target_used, uint64_t incoming, std::vector<std::string>* evicted);
  void EraseLocked(std::unordered_map<std::string, Object>::iterator it);

  mutable std::mutex mu_;
  ArenaAllocator allocator_;
  const uint64_t high_bytes_;
  const uint64_t low_bytes_;
  std::unordered_map<std::string, Object> objects_;
  std::list<std::string> lru_;  // sealed objects, least recently used first
  uint64_t num_sealed_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tandem::pool
