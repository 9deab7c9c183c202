// BlockPool: the physical KV blocks of one engine, with ref counts and a prefix cache.
//
// Block ids are 0..num_blocks-1; the pool owns no KV memory, only bookkeeping (the arenas
// live in the model runner and are indexed by these ids). Each block is in exactly one of two
// states:
//   in use   ref_count > 0; owned by one or more sequences (shared prefix blocks have > 1).
//   free     ref_count == 0; sits in the free list, which is an LRU. A free block that holds a
//            full, hashed block keeps its hash ("free but still cached"), so a later request
//            with the same prefix can revive it with Touch() instead of recomputing it.
// Allocate() takes blocks from the LRU head and evicts their hash mapping; Free() appends
// blocks whose count drops to 0 at the LRU tail, in the order given. This mirrors vLLM v1's
// BlockPool and leveldb's LRU handle cache (in-use entries are off the LRU list).
//
// Invariants (checked by CheckConsistency()):
//   - a block is on the free list iff its ref_count == 0; num_free() == length of that list;
//   - hash -> block map and per-block hashes agree in both directions; a hash maps to at most
//     one block and a block has at most one hash.
//
// Running out of blocks is expected and is not an error: Allocate() returns nullopt and the
// scheduler preempts. Misuse (freeing a free block, bad ids) is a bug and TANDEM_CHECK aborts.
//
// Events: with a sink set (set_event_sink), Allocate() reports the hashes it evicts as one
// BlockRemoved and ResetPrefixCache() reports AllBlocksCleared (kv_events.h). BlockStored is
// reported by the KvCacheManager, which knows the blocks' tokens.
//
// Thread safety: none. The pool is owned by the engine's scheduler and used from that one
// thread only (like vLLM's); wrap it in a lock if that ever changes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"

namespace tandem::kv {

class KvEventSink;

class BlockPool {
 public:
  // Precondition: num_blocks >= 0. All blocks start free, uncached, in id order.
  explicit BlockPool(int32_t num_blocks);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Events go to `sink` from now on (nullptr: none). The sink must outlive the pool.
  void set_event_sink(KvEventSink* sink) { event_sink_ = sink; }

  // Takes `num_blocks` blocks from the LRU head (least recently freed first), evicts any hash
  // they held and sets their ref_count to 1. All or nothing: nullopt, with no change, when
  // fewer than num_blocks blocks are free. Precondition: num_blocks >= 0.
  std::optional<std::vector<int32_t>> Allocate(int32_t num_blocks);

  // Drops one reference from each block; a block that reaches 0 goes to the LRU tail in the
  // order given, so blocks listed first are evicted first. Callers freeing a sequence pass its
  // block table in REVERSE, so the tail of a sequence (least likely to be shared) goes first.
  // Precondition: every block is in use.
  void Free(std::span<const int32_t> block_ids);

  // The block cached under `hash`, free or in use; nullopt on a miss. Does not take a ref.
  std::optional<int32_t> LookupCached(const BlockHash& hash) const;

  // Takes one reference to each block (a prefix-cache hit); free blocks leave the free LRU.
  void Touch(std::span<const int32_t> block_ids);

  // Registers a full, computed block under `hash` so later requests can find it.
  // Precondition: the block is in use and does not hold a different hash.
  // Returns false (and leaves the block uncached) when `hash` already maps to another block:
  // two sequences computed the same content concurrently, and the first one wins.
  bool CacheFullBlock(int32_t block_id, const BlockHash& hash);

  // The hash a block is cached under, if any.
  std::optional<BlockHash> CachedHash(int32_t block_id) const;
  int32_t ref_count(int32_t block_id) const;

  // Drops every hash mapping (e.g. after a weight update). Blocks in use keep their data and
  // owners but are no longer discoverable. Returns the number of mappings dropped.
  size_t ResetPrefixCache();

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return num_free_; }
  // Number of blocks currently cached (free or in use).
  int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }
  // Fraction of blocks in use (ref_count > 0), in [0, 1]; 0 for an empty pool.
  // Feeds vllm:kv_cache_usage_perc.
  double usage() const;
  // Cached blocks whose hash was dropped because Allocate() reused them.
  int64_t num_evictions() const { return num_evictions_; }

  // O(num_blocks) walk of every invariant above; for tests and debug builds.
  Status CheckConsistency() const;

 private:
  static constexpr int32_t kNone = -1;

  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNone;  // free-list links; meaningful only while ref_count == 0
    int32_t next = kNone;
    bool has_hash = false;
    BlockHash hash;
  };

  void CheckId(int32_t block_id) const;
  void PushBack(int32_t block_id);
  void Unlink(int32_t block_id);

  std::vector<Block> blocks_;  // [num_blocks]
  int32_t head_ = kNone;       // next block Allocate() hands out
  int32_t tail_ = kNone;       // most recently freed
  int32_t num_free_ = 0;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
  int64_t num_evictions_ = 0;
  KvEventSink* event_sink_ = nullptr;  // not owned; may be null
};

}  // namespace tandem::kv
