#include "pool/object_table.h"

namespace tandem::pool {

ObjectTable::ObjectTable(uint64_t capacity_bytes, double high_watermark, double low_watermark,
                         std::chrono::milliseconds lease_ttl)
    : allocator_(capacity_bytes),
      high_bytes_(static_cast<uint64_t>(capacity_bytes * high_watermark)),
      low_bytes_(static_cast<uint64_t>(capacity_bytes * low_watermark)),
      lease_ttl_(lease_ttl) {}

void ObjectTable::EraseLocked(std::unordered_map<std::string, Object>::iterator it) {
  if (it->second.sealed) {
    lru_.erase(it->second.lru);
    --num_sealed_;
  }
  allocator_.Free(it->second.offset, it->second.size);
  objects_.erase(it);
}

void ObjectTable::EvictLocked(uint64_t target_used, uint64_t incoming,
                              std::vector<std::string>* evicted) {
  const Clock::time_point now = Clock::now();
  // Pass 0 spares soft-pinned objects; pass 1 takes them too when that was not enough.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto lit = lru_.begin();
         lit != lru_.end() && allocator_.used_bytes() + incoming > target_used;) {
      auto it = objects_.find(*lit);
      ++lit;  // EraseLocked invalidates the current list node
      const Object& obj = it->second;
      if (obj.pins > 0 || obj.lease_until > now) continue;
      if (pass == 0 && obj.soft_pin_until > now) continue;
      bool kept = obj.primary && spill_hook_ && spill_hook_(it->first, obj.offset, obj.size);
      if (kept) ++spilled_;
      if (obj.primary && !kept && evicted != nullptr) evicted->push_back(it->first);
      EraseLocked(it);
      ++evictions_;
    }
  }
}

AllocCode ObjectTable::Allocate(const std::string& key, uint64_t size, bool primary,
                                uint64_t* offset, std::vector<std::string>* evicted_primaries) {
  if (size == 0 || size > kMaxObjectBytes || key.empty() || key.size() > kMaxKeyBytes) {
    return AllocCode::kInvalid;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (objects_.count(key) != 0) return AllocCode::kExists;
  uint64_t need = ArenaAllocator::Rounded(size);
  if (need > allocator_.capacity_bytes()) return AllocCode::kNoSpace;
  if (allocator_.used_bytes() + need > high_bytes_)
    EvictLocked(low_bytes_, need, evicted_primaries);
  auto got = allocator_.Allocate(size);
  // Fragmentation: the bytes are there but not in one range; evict further, oldest first.
  while (!got) {
    uint64_t before = allocator_.used_bytes();
    if (before == 0) break;
    EvictLocked(before - 1, 0, evicted_primaries);
    if (allocator_.used_bytes() == before) break;  // the rest is pinned or unsealed
    got = allocator_.Allocate(size);
  }
  if (!got) return AllocCode::kNoSpace;
  Object obj;
  obj.offset = *got;
  obj.size = size;
  obj.primary = primary;
  objects_.emplace(key, std::move(obj));
  *offset = *got;
  return AllocCode::kAllocated;
}

bool ObjectTable::Seal(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.sealed) return false;
  it->second.sealed = true;
  it->second.lru = lru_.insert(lru_.end(), key);
  ++num_sealed_;
  return true;
}

bool ObjectTable::Abort(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.sealed) return false;
  EraseLocked(it);
  return true;
}

std::optional<ObjectLocation> ObjectTable::LookupAndPin(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.sealed) return std::nullopt;
  Object& obj = it->second;
  ++obj.pins;
  const Clock::time_point now = Clock::now();
  obj.lease_until = now + lease_ttl_;
  if (obj.soft_pin_until > now) obj.soft_pin_until = now + obj.soft_pin_ttl;
  lru_.splice(lru_.end(), lru_, obj.lru);
  return ObjectLocation{obj.offset, obj.size};
}

bool ObjectTable::SoftPin(const std::string& key, std::chrono::milliseconds ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.sealed) return false;
  it->second.soft_pin_ttl = ttl;
  it->second.soft_pin_until = Clock::now() + ttl;
  return true;
}

void ObjectTable::Unpin(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it != objects_.end() && it->second.pins > 0) --it->second.pins;
}

bool ObjectTable::Exists(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  return it != objects_.end() && it->second.sealed;
}

std::vector<std::string> ObjectTable::PrimaryKeys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [key, obj] : objects_) {
    if (obj.sealed && obj.primary) keys.push_back(key);
  }
  return keys;
}

ObjectTableStats ObjectTable::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ObjectTableStats s;
  s.objects = num_sealed_;
  s.used_bytes = allocator_.used_bytes();
  s.capacity_bytes = allocator_.capacity_bytes();
  s.evictions = evictions_;
  s.spilled = spilled_;
  const Clock::time_point now = Clock::now();
  for (const auto& [key, obj] : objects_) {
    s.pinned += obj.pins > 0 ? 1 : 0;
    s.soft_pinned += obj.soft_pin_until > now ? 1 : 0;
  }
  return s;
}

}  // namespace tandem::pool
