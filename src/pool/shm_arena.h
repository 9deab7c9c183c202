// ShmArena: the worker's shared-memory arena, one memfd mapped read-write. Local clients
// receive the fd (SCM_RIGHTS) and map the same pages, so objects are read and written in
// place. With huge pages requested but none available, it falls back to normal pages
// and logs a warning.
//
// Thread safety: immutable after Create; the bytes are coordinated by ObjectTable.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"

namespace tandem::pool {

class ShmArena {
 public:
  // `size_bytes` > 0 (rounded up to 2 MiB). ResourceExhausted when the memory cannot be
  // reserved or mapped.
  static StatusOr<std::unique_ptr<ShmArena>> Create(uint64_t size_bytes, bool huge_pages);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  int fd() const { return fd_; }
  uint8_t* base() const { return base_; }
  uint64_t size_bytes() const { return size_bytes_; }
  bool huge_pages() const { return huge_pages_; }

 private:
  // Maps `fd` (taking ownership; closed on failure).
  static StatusOr<std::unique_ptr<ShmArena>> MapFd(int fd, uint64_t size, bool huge);
  ShmArena(int fd, uint8_t* base, uint64_t size_bytes, bool huge_pages)
      : fd_(fd), base_(base), size_bytes_(size_bytes), huge_pages_(huge_pages) {}
  int fd_;
  uint8_t* base_;
  uint64_t size_bytes_;
  bool huge_pages_;
};

}  // namespace tandem::pool
