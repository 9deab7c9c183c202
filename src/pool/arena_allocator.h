// ArenaAllocator: hands out byte ranges of an arena of fixed capacity (offsets only; it
// never touches the memory). Best fit over free ranges, coalescing neighbours on free.
// Allocation sizes are rounded up to kAlignment (a cache line).
//
// Thread safety: none; ObjectTable serializes calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace tandem::pool {

class ArenaAllocator {
 public:
  static constexpr uint64_t kAlignment = 64;
  explicit ArenaAllocator(uint64_t capacity_bytes);

  static uint64_t Rounded(uint64_t size) {
    return (size + kAlignment - 1) / kAlignment * kAlignment;
  }

  // The offset of Rounded(size) free bytes, or nullopt when no free range is big enough
  // (expected when full: not an error). Precondition: size > 0.
  std::optional<uint64_t> Allocate(uint64_t size);
  // Returns [offset, offset + Rounded(size)) from an earlier Allocate(size).
  void Free(uint64_t offset, uint64_t size);

  uint64_t capacity_bytes() const { return capacity_; }
  uint64_t used_bytes() const { return used_; }
  size_t num_free_ranges() const { return free_by_offset_.size(); }

 private:
  void InsertFree(uint64_t offset, uint64_t size);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, offset)
};

}  // namespace tandem::pool
