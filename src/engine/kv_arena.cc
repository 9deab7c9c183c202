#include "engine/kv_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <random>

namespace tandem {

KvArena::KvArena(int64_t num_blocks, int n_layers, int block_size, int64_t key_row_bytes,
                 int64_t value_row_bytes, KvDtype dtype)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      key_row_bytes_(key_row_bytes),
      value_row_bytes_(value_row_bytes),
      dtype_(dtype),
      k_block_bytes_(static_cast<int64_t>(n_layers) * block_size * key_row_bytes),
      v_block_bytes_(static_cast<int64_t>(n_layers) * block_size * value_row_bytes) {}

StatusOr<std::unique_ptr<KvArena>> KvArena::Create(int64_t num_blocks, int n_layers, int block_size,
                                                   int64_t key_row_bytes, int64_t value_row_bytes,
                                                   KvDtype dtype, bool shared) {
  std::unique_ptr<KvArena> a(
      new KvArena(num_blocks, n_layers, block_size, key_row_bytes, value_row_bytes, dtype));
  const size_t k_bytes = static_cast<size_t>(num_blocks * a->k_block_bytes_);
  const size_t v_bytes = static_cast<size_t>(num_blocks * a->v_block_bytes_);
  a->map_size_ = k_bytes + v_bytes;
  if (shared) {
    a->fd_ = memfd_create("tandem-kv-arena", MFD_CLOEXEC);
    if (a->fd_ < 0) return InternalError(std::string("memfd_create for the KV arena: ") + std::strerror(errno));
    if (ftruncate(a->fd_, static_cast<off_t>(a->map_size_)) != 0) {
      return InternalError(std::string("sizing the KV arena memfd: ") + std::strerror(errno));
    }
    a->base_ = mmap(nullptr, a->map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd_, 0);
  } else {
    a->base_ = mmap(nullptr, a->map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  }
  if (a->base_ == MAP_FAILED) {
    a->base_ = nullptr;
    return InternalError("cannot map " + std::to_string(a->map_size_) + " bytes for the KV cache: " +
                         std::strerror(errno));
  }
  if (!shared) madvise(a->base_, a->map_size_, MADV_HUGEPAGE);
  // Fault every page in now, as an accelerator reserves its KV memory at start-up: memory
  // that is not there fails here with a clear error instead of later under load; the
  // first use of a block does not pay for page faults (or for the pull that fills it);
  // and the process's RSS is its steady-state size from the start (a soak test reads
  // any growth as a leak).
  if (madvise(a->base_, a->map_size_, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINVAL) {  // EINVAL: a kernel before 5.14; pages then come on first use
      return ResourceExhaustedError("cannot reserve " + std::to_string(a->map_size_) +
                                    " bytes of memory for the KV cache (--kv-cache-memory): " + std::strerror(errno));
    }
  }
  a->keys_ = static_cast<uint8_t*>(a->base_);
  a->values_ = static_cast<uint8_t*>(a->base_) + k_bytes;
  a->arena_id_ = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  return a;
}

KvArena::~KvArena() {
  if (base_ != nullptr) munmap(base_, map_size_);
  if (fd_ >= 0) close(fd_);
}

transfer::KvMemory KvArena::memory() const {
  transfer::KvMemory m;
  m.keys = keys_;
  m.values = values_;
  m.k_block_bytes = static_cast<uint64_t>(k_block_bytes_);
  m.v_block_bytes = static_cast<uint64_t>(v_block_bytes_);
  m.num_blocks = num_blocks_;
  m.fd = fd_;
  m.map_size = map_size_;
  m.keys_offset = 0;
  m.values_offset = static_cast<uint64_t>(values_ - static_cast<uint8_t*>(base_));
  m.arena_id = arena_id_;
  return m;
}

}  // namespace tandem
