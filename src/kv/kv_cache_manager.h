// KvCacheManager: per-request block tables on top of a BlockPool, with prefix caching.
//
// The scheduler's view of the paged KV cache (vLLM v1's KVCacheManager). For each request it
// keeps the block table (logical block i of the sequence -> physical block id), the chained
// hashes of the request's full blocks (block_hash.h) and how many of its blocks are already
// registered in the prefix cache. It decides nothing about scheduling: when blocks run out,
// AllocateSlots() returns nullopt and the scheduler preempts (by calling Free()) or waits.
//
// Typical step, from the scheduler:
//   waiting request:  auto hit = m.GetComputedBlocks(id, tokens);
//                     auto fresh = m.AllocateSlots(id, hit.num_computed_tokens, n_new, hit);
//                     if (!fresh) { stop admitting; }   // nothing changed
//                     // request.num_computed_tokens = hit.num_computed_tokens
//   running request:  if (!m.AllocateSlots(id, request.num_computed_tokens, n_new)) preempt;
//   after the forward pass wrote the step's KV:
//                     m.CacheComputedBlocks(id, tokens, request.num_computed_tokens);
//   finished / aborted / preempted:  m.Free(id);
// The model runner reads GetBlockTable(id): token position p of the request lives in block
// table[p / block_size_tokens], slot p % block_size_tokens.
//
// Prefix caching: a block is registered (and becomes visible to other requests) only once it
// is full AND the caller reports its KV as computed, so a hit never points at unwritten KV;
// a partial last block is never cached. A hit never covers the whole prompt: at least the
// last prompt token is recomputed so the step has logits to sample from.
//
// Events: with a sink set, every block that becomes discoverable in the prefix cache is
// reported as BlockStored (one event per run of consecutive blocks registered by one
// CacheComputedBlocks call, with the parent hash, the blocks' tokens and the block size);
// evictions and resets are reported by the pool (block_pool.h). Blocks that are not in the
// prefix cache (caching off, partial blocks, content another block already holds) are never
// reported.
//
// Ownership: owns its BlockPool. Request ids are the caller's strings; per-request state is
// created by the first call naming the id and destroyed by Free().
// Thread safety: none; owned and used by the scheduler thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace tandem::kv {

class KvEventSink;

struct KvCacheConfig {
  int32_t num_blocks = 0;          // physical blocks in the arena
  int32_t block_size_tokens = 16;  // --block-size
  bool enable_prefix_caching = true;
  std::string model_fingerprint;  // identifies weights + tokenizer; part of every block key
  std::string kv_dtype = "f16";   // KV cache element type; part of every block key
};

// A prefix-cache hit for a request that has no blocks yet.
struct ComputedBlocks {
  std::vector<int32_t> block_ids;   // physical ids of the leading cached blocks, in order
  int32_t num_computed_tokens = 0;  // block_ids.size() * block_size_tokens
};

// Cumulative counters, in tokens (Prometheus counters vllm:prefix_cache_queries / _hits).
struct PrefixCacheStats {
  int64_t num_requests = 0;    // GetComputedBlocks() calls with prefix caching on
  int64_t queries_tokens = 0;  // prompt tokens looked up
  int64_t hits_tokens = 0;     // of which found in the cache
};

class KvCacheManager {
 public:
  // Preconditions: config.num_blocks >= 0, config.block_size_tokens > 0.
  explicit KvCacheManager(KvCacheConfig config);

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // Prefix-cache events go to `sink` from now on (nullptr: none). The sink must outlive the
  // manager and is called on the caller's (scheduler) thread.
  void set_event_sink(KvEventSink* sink);

  // Longest run of leading full blocks of `token_ids` already in the cache, capped so that at
  // least the last token is left to compute. Takes no references: pass the result straight to
  // AllocateSlots() for the same request, with no other pool mutation in between (the hit
  // blocks may be free and evictable until then). Counts queries/hits in the stats.
  // Empty when prefix caching is disabled. `cache_salt` (e.g. a per-tenant salt or adapter
  // id) goes into every block hash of this request; it is fixed by the first call for the id.
  // Precondition: the request holds no blocks.
  ComputedBlocks GetComputedBlocks(const std::string& request_id,
                                   std::span<const int32_t> token_ids,
                                   std::string_view cache_salt = {});

  // Grows the request's block table so it has slots for
  // num_computed_tokens + num_new_tokens + num_lookahead_tokens tokens.
  //   num_computed_tokens: tokens whose KV is already in the request's blocks, INCLUDING the
  //     hit in `new_computed` (for a new request, new_computed.num_computed_tokens).
  //   new_computed: a hit from GetComputedBlocks(); only for a request with no blocks yet.
  //     Its blocks are shared (ref-counted) and prepended to the table.
  //   num_lookahead_tokens: extra slots for speculative draft tokens.
  // All or nothing: returns the newly allocated block ids (possibly empty), or nullopt with
  // no state changed when the pool cannot supply enough blocks.
  std::optional<std::vector<int32_t>> AllocateSlots(const std::string& request_id,
                                                    int32_t num_computed_tokens,
                                                    int32_t num_new_tokens,
                                                    const ComputedBlocks& new_computed = {},
                                                    int32_t num_lookahead_tokens = 0);

  // Registers the request's blocks that are full and computed, i.e. the first
  // num_computed_tokens / block_size_tokens blocks, in the prefix cache. Call after the
  // forward pass has written their KV. `token_ids` is the request's whole token list so far
  // (prompt + outputs; it may run ahead of num_computed_tokens). No-op with caching off.
  // Precondition: those blocks are allocated to the request.
  void CacheComputedBlocks(const std::string& request_id, std::span<const int32_t> token_ids,
                           int32_t num_computed_tokens);

  // Releases the request's blocks (tail first, so a sequence's tail is evicted before its
  // shared prefix) and forgets the request. Unknown ids are ignored.
  void Free(const std::string& request_id);

  // Speculative decoding's rollback: releases the request's blocks beyond the first
  // ceil(num_tokens / block_size) (tail first), e.g. slots of rejected draft tokens.
  // Blocks registered in the prefix cache are never released here. Unknown ids are ignored.
  void FreeTail(const std::string& request_id, int32_t num_tokens);

  // Parallel sampling (n > 1): gives `child_id` (which holds nothing yet) the KV of the
  // first `num_tokens` tokens of `parent_id`: the full blocks are shared (one more
  // reference each; they are never written again), and the partial last block, if any,
  // is a fresh block the caller must fill by copying `copy_from` into `copy_to`
  // (copy-on-write: both sequences write their next tokens into that block). The child
  // inherits the parent's hashes and cache salt. Returns nullopt, with nothing changed,
  // when no block is free for the copy.
  // Precondition: the parent holds at least ceil(num_tokens / block_size) blocks.
  struct ForkCopy {
    int32_t copy_from = -1;  // -1: no partial block (nothing to copy)
    int32_t copy_to = -1;
  };
  std::optional<ForkCopy> Fork(const std::string& parent_id, const std::string& child_id,
                               int32_t num_tokens);

  // The request's physical block ids in sequence order; empty for an unknown id.
  // The reference is valid until the next non-const call.
  const std::vector<int32_t>& GetBlockTable(const std::string& request_id) const;
  // Hashes of the request's full blocks known so far (pool connector keys); empty when
  // prefix caching is disabled or the id is unknown.
  const std::vector<BlockHash>& GetBlockHashes(const std::string& request_id) const;

  // Drops every prefix-cache entry; returns how many. Requests keep their blocks.
  size_t ResetPrefixCache() { return pool_.ResetPrefixCache(); }

  bool prefix_caching_enabled() const { return config_.enable_prefix_caching; }
  int32_t block_size_tokens() const { return config_.block_size_tokens; }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  double usage() const { return pool_.usage(); }  // vllm:kv_cache_usage_perc
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  size_t num_requests() const { return requests_.size(); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct RequestState {
    explicit RequestState(BlockHasher h) : hasher(std::move(h)) {}
    std::vector<int32_t> block_table;  // [num logical blocks] physical ids
    BlockHasher hasher;                // hashes of full blocks seen so far
    int32_t num_cached_blocks = 0;     // leading blocks already registered in the pool
  };

  // Finds the request's state or creates it with `cache_salt` as the hash extra.
  RequestState& StateFor(const std::string& request_id, std::string_view cache_salt = {});
  int32_t BlocksFor(int64_t num_tokens) const;

  KvCacheConfig config_;
  BlockHash root_hash_;
  BlockPool pool_;
  KvEventSink* event_sink_ = nullptr;  // not owned; may be null
  std::unordered_map<std::string, RequestState> requests_;
  PrefixCacheStats stats_;
};

}  // namespace tandem::kv
