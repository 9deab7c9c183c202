// KvMemory: the transfer's view of an engine's KV arena (src/engine/kv_arena.h): where
// each block's K and V bytes live, and, for a shared arena, the memfd that maps it.
// Thread safety: a plain view; the engine and the lease table decide who touches which
// block when.
#pragma once

#include <cstdint>

namespace tandem::transfer {

struct KvMemory {
  uint8_t* keys = nullptr;      // block b's K bytes at keys + b * k_block_bytes
  uint8_t* values = nullptr;    // block b's V bytes at values + b * v_block_bytes
  uint64_t k_block_bytes = 0;
  uint64_t v_block_bytes = 0;
  int64_t num_blocks = 0;
  // Shared arena (memfd) only: the fd, its size, and where keys/values start in it.
  int fd = -1;
  uint64_t map_size = 0;
  uint64_t keys_offset = 0;
  uint64_t values_offset = 0;
  uint64_t arena_id = 0;  // random per arena; lets a reader cache its mapping

  uint8_t* BlockK(int32_t b) const { return keys + static_cast<uint64_t>(b) * k_block_bytes; }
  uint8_t* BlockV(int32_t b) const { return values + static_cast<uint64_t>(b) * v_block_bytes; }
};

}  // namespace tandem::transfer
