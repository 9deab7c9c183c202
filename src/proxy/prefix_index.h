// PrefixIndex: which instance holds which KV blocks, built from the instances' KV
// events, and how long a prefix of a prompt each instance has cached.
//
// Design. The proxy links neither a model nor a tokenizer, and it cannot recompute the
// engines' block hashes (they depend on the model fingerprint, the KV dtype, the cache
// salt). It does not need to: a BlockStored event carries each block's parent hash and
// token ids, so the index stores, per block, the edge
//     (parent hash or "root", digest of the block's token ids) -> block hash
// and, per block hash, the instances that hold it. To match a prompt (token ids from an
// instance's POST /tokenize) the index walks that chain from the root: block i of the
// prompt matches when an edge leaves one of the hashes matched at depth i-1 (the root
// for i = 0) with the digest of the prompt's tokens of block i. An instance's cached
// prefix is the number of leading blocks it holds along the walk, times its block size.
// The digest is 64 bits (a collision would only misroute a request, never change an
// answer). Several hashes may share an edge (the same tokens under a cache salt, a LoRA
// or another model); all are followed.
//
// Salted and LoRA requests: their engine hashes differ from the unsalted chain; the
// router does not score them (they are routed by load), and BlockStored events with a
// lora_id are not indexed, so plain prompts never match LoRA blocks.
//
// Removal: BlockRemoved drops the instance from those blocks; AllBlocksCleared and
// DropInstance (a sequence gap, a restart, silence, the instance going down) drop
// everything the instance holds. A block held by nobody leaves the index. At most
// `max_blocks` distinct blocks are kept; BlockStored beyond that is not indexed (the
// index under-predicts; it never claims a block an instance does not hold).
//
// Instances are small integers chosen by the caller (one per subscribed endpoint).
//
// Thread safety: all methods are thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "proxy/kv_event_batch.h"

namespace tandem::proxy {

class PrefixIndex {
 public:
  explicit PrefixIndex(size_t max_blocks = size_t{1} << 22) : max_blocks_(max_blocks) {}

  // Applies `batch`'s events, in order, for `instance`.
  void Apply(int instance, const KvEventBatch& batch);
  void Apply(int instance, const KvEvent& event);
  // Forgets everything `instance` holds.
  void DropInstance(int instance);

  struct Match {
    int instance;
    int64_t cached_tokens;  // leading prompt tokens the instance holds (whole blocks)
  };
  // The instances holding at least one leading block of `tokens`, longest first.
  std::vector<Match> MatchPrefix(std::span<const int32_t> tokens) const;

  size_t num_blocks() const;              // distinct block hashes
  size_t num_blocks(int instance) const;  // blocks `instance` holds
  // The block size of `instance`'s last BlockStored (0 before any).
  int64_t block_size(int instance) const;
  // BlockStored blocks not indexed: over max_blocks, or malformed (token count is not
  // blocks * block_size).
  uint64_t num_rejected() const;

 private:
  struct Edge {
    KvBlockHash parent;  // "" = the root (no parent)
    uint64_t digest;
    bool operator==(const Edge&) const = default;
  };
  struct EdgeHasher {
    size_t operator()(const Edge& e) const;
  };
  struct Block {
    Edge edge;
    std::vector<int> holders;  // instances, few
  };
  struct Instance {
    std::unordered_set<KvBlockHash> blocks;
    int64_t block_size = 0;
  };

  void StoreLocked(int instance, const KvEvent& event);
  void RemoveLocked(int instance, const KvBlockHash& hash);
  void DropLocked(int instance);

  const size_t max_blocks_;
  mutable std::mutex mu_;
  std::unordered_map<Edge, std::vector<KvBlockHash>, EdgeHasher> edges_;
  std::unordered_map<KvBlockHash, Block> blocks_;
  std::unordered_map<int, Instance> instances_;
  uint64_t rejected_ = 0;
};

// The digest of one block's token ids (the index's edge label).
uint64_t TokenBlockDigest(std::span<const int32_t> tokens);

}  // namespace tandem::proxy
