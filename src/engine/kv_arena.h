// KvArena: the memory of the paged KV cache, and PagedKvStore, one sequence's view of it.
//
// Layout: block-major, [num_blocks][n_layers][block_size][key_row_bytes] for K and the
// same for V (rows in the arena's KvDtype: kernels/kv_dtype.h), so all layers of one
// block are contiguous — a block is the unit the
// transfer connector and the pool move, and it can be copied in one piece.
// Memory: anonymous pages, or (shared = true, for a KV producer) one memfd mapping that
// a same-host consumer maps read-only to pull blocks without a copy over a socket
// (docs/KV_TRANSFER.md). Either way pages are committed only when first written.
// Ownership: the arena owns its memory; a PagedKvStore borrows the arena and a block
// table, which must outlive it.
// Thread safety: distinct blocks may be written concurrently; the engine serialises
// writes and reads of the same block by step.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/status.h"
#include "model/kv_store.h"
#include "transfer/kv_memory.h"

namespace tandem {

class KvArena {
 public:
  // Maps the memory; InternalError if the system refuses it. Rows of key_row_bytes /
  // value_row_bytes (ModelConfig::KeyRowBytes / ValueRowBytes of `dtype`).
  static StatusOr<std::unique_ptr<KvArena>> Create(int64_t num_blocks, int n_layers, int block_size,
                                                   int64_t key_row_bytes, int64_t value_row_bytes,
                                                   KvDtype dtype, bool shared);
  ~KvArena();
  KvArena(const KvArena&) = delete;
  KvArena& operator=(const KvArena&) = delete;

  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  KvDtype dtype() const { return dtype_; }
  // Bytes of one block (all layers, K and V).
  int64_t block_bytes() const { return k_block_bytes_ + v_block_bytes_; }

  uint8_t* KeyRow(int32_t block, int layer, int offset) {
    return keys_ + block * k_block_bytes_ +
           (static_cast<int64_t>(layer) * block_size_ + offset) * key_row_bytes_;
  }
  uint8_t* ValueRow(int32_t block, int layer, int offset) {
    return values_ + block * v_block_bytes_ +
           (static_cast<int64_t>(layer) * block_size_ + offset) * value_row_bytes_;
  }
  // The whole of block `block`: K then V parts (for copies between arenas).
  uint8_t* BlockKeys(int32_t block) { return keys_ + block * k_block_bytes_; }
  uint8_t* BlockValues(int32_t block) { return values_ + block * v_block_bytes_; }
  // Copies block `src` (all layers, K and V) over block `dst` (n > 1's copy-on-write of
  // a prompt's partial last block).
  void CopyBlock(int32_t src, int32_t dst) {
    std::memcpy(BlockKeys(dst), BlockKeys(src), static_cast<size_t>(k_block_bytes_));
    std::memcpy(BlockValues(dst), BlockValues(src), static_cast<size_t>(v_block_bytes_));
  }
  // The transfer's view of this memory (with the memfd when shared).
  transfer::KvMemory memory() const;

 private:
  KvArena(int64_t num_blocks, int n_layers, int block_size, int64_t key_row_bytes,
          int64_t value_row_bytes, KvDtype dtype);

  int64_t num_blocks_;
  int block_size_;
  int64_t key_row_bytes_;
  int64_t value_row_bytes_;
  KvDtype dtype_;
  int64_t k_block_bytes_;
  int64_t v_block_bytes_;
  void* base_ = nullptr;  // one mapping: keys, then values
  size_t map_size_ = 0;
  int fd_ = -1;           // memfd when shared
  uint64_t arena_id_ = 0;
  uint8_t* keys_ = nullptr;
  uint8_t* values_ = nullptr;
};

// The KvStore of one sequence: position p lives in block_table[p / block_size].
class PagedKvStore final : public KvStore {
 public:
  PagedKvStore(KvArena* arena, const std::vector<int32_t>* block_table)
      : KvStore(arena->dtype()), arena_(arena), table_(block_table) {}

  uint8_t* KeyRow(int layer, int64_t pos) override {
    const int b = arena_->block_size();
    return arena_->KeyRow((*table_)[pos / b], layer, static_cast<int>(pos % b));
  }
  uint8_t* ValueRow(int layer, int64_t pos) override {
    const int b = arena_->block_size();
    return arena_->ValueRow((*table_)[pos / b], layer, static_cast<int>(pos % b));
  }
  int64_t capacity() const override { return static_cast<int64_t>(table_->size()) * arena_->block_size(); }

 private:
  KvArena* arena_;
  const std::vector<int32_t>* table_;
};

}  // namespace tandem
