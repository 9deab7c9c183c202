// Prefix-cache keys for full KV blocks: a chained, content-addressed 128-bit hash.
//
// Scheme (version 1; pinned by a golden test, change it only together with that test):
//   root   h_{-1} = XXH3_128("tandem.kv.block_hash.v1"
//                            || str(model_fingerprint) || u32(block_size_tokens) || str(kv_dtype))
//   block  h_i    = XXH3_128(bytes(h_{i-1}) || u32(n)
//                            || i32(token_ids[i*B]) || ... || i32(token_ids[i*B+n-1])
//                            || str(extra))
// where u32/i32 are 4-byte little-endian, str(s) = u32(len(s)) || s, and bytes(h) is the
// 16-byte canonical form of a hash (big-endian high64 then low64; the same bytes `xxh128sum`
// prints as hex). Every field is explicitly serialized and length-prefixed, the hash is
// seedless, and nothing depends on the host, the process or std::hash: the same prompt gives
// the same keys in every process on every node. Because each block hash chains its parent,
// equal tokens at the same position under a different earlier prefix hash differently.
//
// Only FULL blocks (exactly block_size_tokens tokens) are ever hashed; a partial last block
// has no key and is never shared.
//
// Thread safety: free functions are pure; BlockHash is a value; a BlockHasher is not
// thread-safe (one owner mutates it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::kv {

// A 128-bit XXH3 digest. Ordered and hashable so it can key maps.
struct BlockHash {
  uint64_t high = 0;  // XXH128_hash_t::high64
  uint64_t low = 0;   // XXH128_hash_t::low64

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
  friend auto operator<=>(const BlockHash&, const BlockHash&) = default;

  // The 16-byte canonical form: big-endian high64, then big-endian low64.
  std::array<uint8_t, 16> Bytes() const;
  // 32 lowercase hex digits of Bytes() (pool keys and logs use this form).
  std::string ToHex() const;
  // Inverse of ToHex; accepts upper or lower case. InvalidArgument unless exactly 32 hex digits.
  static StatusOr<BlockHash> FromHex(std::string_view hex);
};

// For unordered containers. The digest is already uniformly distributed, so the low word is a
// perfectly good bucket hash; this never feeds any persistent or cross-process key.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.low); }
};

// h_{-1}: binds every key to the model, the block size and the KV cache dtype, so caches of
// different models or layouts can never alias. Precondition: block_size_tokens > 0.
BlockHash ComputeRootHash(std::string_view model_fingerprint, int32_t block_size_tokens,
                          std::string_view kv_dtype);

// h_i from its parent h_{i-1}, the block's token ids ([block_size_tokens]) and extra bytes
// (cache salt, adapter id, ...; empty for none).
BlockHash ComputeBlockHash(const BlockHash& parent, std::span<const int32_t> block_token_ids,
                           std::string_view extra);

// Hashes of every FULL block of token_ids: floor(size / block_size_tokens) entries; the
// partial tail is ignored. `extra` is applied to every block.
std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> token_ids,
                                      int32_t block_size_tokens, std::string_view extra);

// The incremental form for a growing sequence (prompt, then decode tokens). Each Update()
// hashes only the blocks that became full since the previous call, chaining from the last
// known hash, so a sequence costs one block hash per block over its whole life.
// hashes() always equals HashFullBlocks(root, tokens, block_size, extra) of the latest tokens.
class BlockHasher {
 public:
  // Precondition: block_size_tokens > 0.
  BlockHasher(const BlockHash& root, int32_t block_size_tokens, std::string extra = {});

  // `token_ids` is the whole sequence so far. Precondition: it extends (or equals) the
  // sequence of the previous call; tokens already hashed must not change.
  // Returns the number of new block hashes appended.
  size_t Update(std::span<const int32_t> token_ids);

  // One entry per full block, in sequence order.
  const std::vector<BlockHash>& hashes() const { return hashes_; }
  int32_t block_size_tokens() const { return block_size_tokens_; }
  const std::string& extra() const { return extra_; }

 private:
  BlockHash root_;
  int32_t block_size_tokens_;
  std::string extra_;
  std::vector<BlockHash> hashes_;
};

}  // namespace tandem::kv
