#include "kv/block_pool.h"

#include <string>

#include "common/logging.h"
#include "kv/kv_events.h"

namespace tandem::kv {

BlockPool::BlockPool(int32_t num_blocks) {
  TANDEM_CHECK(num_blocks >= 0) << "num_blocks=" << num_blocks;
  blocks_.resize(static_cast<size_t>(num_blocks));
  // Id order makes allocation deterministic, which keeps tests and logs readable.
  for (int32_t id = 0; id < num_blocks; ++id) PushBack(id);
}

void BlockPool::CheckId(int32_t block_id) const {
  TANDEM_CHECK(block_id >= 0 && block_id < num_blocks())
      << "block id " << block_id << " out of range [0, " << num_blocks() << ")";
}

void BlockPool::PushBack(int32_t block_id) {
  Block& b = blocks_[block_id];
  b.prev = tail_;
  b.next = kNone;
  if (tail_ == kNone) {
    head_ = block_id;
  } else {
    blocks_[tail_].next = block_id;
  }
  tail_ = block_id;
  ++num_free_;
}

void BlockPool::Unlink(int32_t block_id) {
  Block& b = blocks_[block_id];
  if (b.prev == kNone) {
    head_ = b.next;
  } else {
    blocks_[b.prev].next = b.next;
  }
  if (b.next == kNone) {
    tail_ = b.prev;
  } else {
    blocks_[b.next].prev = b.prev;
  }
  b.prev = b.next = kNone;
  --num_free_;
}

std::optional<std::vector<int32_t>> BlockPool::Allocate(int32_t num_blocks) {
  TANDEM_CHECK(num_blocks >= 0) << "num_blocks=" << num_blocks;
  if (num_blocks > num_free_) return std::nullopt;
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(num_blocks));
  BlockRemoved removed;
  for (int32_t i = 0; i < num_blocks; ++i) {
    const int32_t id = head_;
    Unlink(id);
    Block& b = blocks_[id];
    if (b.has_hash) {
      // The block's old content is about to be overwritten; its key must not outlive it.
      cached_.erase(b.hash);
      b.has_hash = false;
      ++num_evictions_;
      if (event_sink_ != nullptr) removed.block_hashes.push_back(b.hash);
    }
    b.ref_count = 1;
    ids.push_back(id);
  }
  if (!removed.block_hashes.empty()) event_sink_->Record(std::move(removed));
  return ids;
}

void BlockPool::Free(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    CheckId(id);
    Block& b = blocks_[id];
    TANDEM_CHECK(b.ref_count > 0) << "double free of block " << id;
    if (--b.ref_count == 0) PushBack(id);
  }
}

std::optional<int32_t> BlockPool::LookupCached(const BlockHash& hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::Touch(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    CheckId(id);
    Block& b = blocks_[id];
    if (b.ref_count == 0) Unlink(id);
    ++b.ref_count;
  }
}

bool BlockPool::CacheFullBlock(int32_t block_id, const BlockHash& hash) {
  CheckId(block_id);
  Block& b = blocks_[block_id];
  TANDEM_CHECK(b.ref_count > 0) << "caching free block " << block_id;
  if (b.has_hash) {
    TANDEM_CHECK(b.hash == hash) << "block " << block_id << " already cached as " << b.hash.ToHex()
                                 << ", not " << hash.ToHex();
    return true;
  }
  if (!cached_.try_emplace(hash, block_id).second) return false;
  b.has_hash = true;
  b.hash = hash;
  return true;
}

std::optional<BlockHash> BlockPool::CachedHash(int32_t block_id) const {
  CheckId(block_id);
  const Block& b = blocks_[block_id];
  if (!b.has_hash) return std::nullopt;
  return b.hash;
}

int32_t BlockPool::ref_count(int32_t block_id) const {
  CheckId(block_id);
  return blocks_[block_id].ref_count;
}

size_t BlockPool::ResetPrefixCache() {
  const size_t dropped = cached_.size();
  for (const auto& [hash, id] : cached_) blocks_[id].has_hash = false;
  cached_.clear();
  if (event_sink_ != nullptr) event_sink_->Record(AllBlocksCleared{});
  return dropped;
}

double BlockPool::usage() const {
  if (blocks_.empty()) return 0.0;
  return static_cast<double>(num_blocks() - num_free_) / static_cast<double>(num_blocks());
}

Status BlockPool::CheckConsistency() const {
  const int32_t n = num_blocks();
  std::vector<bool> on_list(static_cast<size_t>(n), false);
  int32_t listed = 0;
  int32_t prev = kNone;
  for (int32_t id = head_; id != kNone; id = blocks_[id].next) {
    if (id < 0 || id >= n) return InternalError("free list holds bad id " + std::to_string(id));
    if (on_list[id]) return InternalError("free list cycles at block " + std::to_string(id));
    on_list[id] = true;
    if (blocks_[id].prev != prev) {
      return InternalError("free list back link broken at block " + std::to_string(id));
    }
    if (blocks_[id].ref_count != 0) {
      return InternalError("block " + std::to_string(id) + " is free-listed with ref_count " +
                           std::to_string(blocks_[id].ref_count));
    }
    prev = id;
    ++listed;
  }
  if (prev != tail_) return InternalError("free list tail mismatch");
  if (listed != num_free_) {
    return InternalError("free list length " + std::to_string(listed) + " != num_free " +
                         std::to_string(num_free_));
  }
  int32_t hashed = 0;
  for (int32_t id = 0; id < n; ++id) {
    const Block& b = blocks_[id];
    if (b.ref_count < 0) return InternalError("negative ref_count on block " + std::to_string(id));
    if (b.ref_count == 0 && !on_list[id]) {
      return InternalError("block " + std::to_string(id) + " has ref_count 0 but is not free");
    }
    if (b.has_hash) {
      ++hashed;
      auto it = cached_.find(b.hash);
      if (it == cached_.end() || it->second != id) {
        return InternalError("block " + std::to_string(id) + " hash " + b.hash.ToHex() +
                             " is not mapped back to it");
      }
    }
  }
  if (hashed != static_cast<int32_t>(cached_.size())) {
    return InternalError("hash map has " + std::to_string(cached_.size()) + " entries but " +
                         std::to_string(hashed) + " blocks hold a hash");
  }
  return Status::Ok();
}

}  // namespace tandem::kv
