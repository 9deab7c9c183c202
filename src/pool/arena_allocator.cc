#include "pool/arena_allocator.h"

#include "common/logging.h"

namespace tandem::pool {

ArenaAllocator::ArenaAllocator(uint64_t capacity_bytes)
    : capacity_(capacity_bytes / kAlignment * kAlignment) {
  if (capacity_ > 0) InsertFree(0, capacity_);
}

void ArenaAllocator::InsertFree(uint64_t offset, uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void ArenaAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t size) {
  uint64_t need = Rounded(size);
  auto best = free_by_size_.lower_bound({need, 0});
  if (best == free_by_size_.end()) return std::nullopt;
  auto [range_size, offset] = *best;
  EraseFree(free_by_offset_.find(offset));
  if (range_size > need) InsertFree(offset + need, range_size - need);
  used_ += need;
  return offset;
}

void ArenaAllocator::Free(uint64_t offset, uint64_t size) {
  uint64_t len = Rounded(size);
  TANDEM_CHECK(offset + len <= capacity_ && used_ >= len) << "bad free " << offset;
  used_ -= len;
  // Coalesce with the free neighbours on both sides.
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == offset + len) {
    len += next->second;
    EraseFree(next);
  }
  auto after = free_by_offset_.lower_bound(offset);
  if (after != free_by_offset_.begin()) {
    auto prev = std::prev(after);
    TANDEM_CHECK(prev->first + prev->second <= offset) << "double free at " << offset;
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      len += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, len);
}

}  // namespace tandem::pool
