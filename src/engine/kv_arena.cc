#include "engine/kv_arena.h"

namespace tandem {

KvArena::KvArena(int64_t num_blocks, int n_layers, int block_size, int kv_dim, int v_dim)
    : num_blocks_(num_blocks),
      n_layers_(n_layers),
      block_size_(block_size),
      kv_dim_(kv_dim),
      v_dim_(v_dim),
      k_block_elems_(static_cast<int64_t>(n_layers) * block_size * kv_dim),
      v_block_elems_(static_cast<int64_t>(n_layers) * block_size * v_dim),
      keys_(new uint16_t[static_cast<size_t>(num_blocks * k_block_elems_)]),
      values_(new uint16_t[static_cast<size_t>(num_blocks * v_block_elems_)]) {}

}  // namespace tandem
