#include "pool/shm_arena.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "common/logging.h"

namespace tandem::pool {
namespace {

constexpr uint64_t kHugePageBytes = 2ull << 20;

}  // namespace

StatusOr<std::unique_ptr<ShmArena>> ShmArena::Create(uint64_t size_bytes, bool huge_pages) {
  if (size_bytes == 0) return InvalidArgumentError("shared memory size must be > 0");
  uint64_t size = (size_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (huge_pages) {
    int fd = memfd_create("tandem-pool", MFD_CLOEXEC | MFD_HUGETLB);
    if (fd >= 0) {
      if (ftruncate(fd, static_cast<off_t>(size)) == 0) {
        auto arena = MapFd(fd, size, true);
        if (arena.ok()) return arena;
      } else {
        close(fd);
      }
    }
    TANDEM_LOG(WARNING) << "--enable_huge_tlb: no huge pages available for " << (size >> 20)
                        << " MiB (" << std::strerror(errno) << "); falling back to normal pages";
  }
  int fd = memfd_create("tandem-pool", MFD_CLOEXEC);
  if (fd < 0) return ResourceExhaustedError(std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    return ResourceExhaustedError("ftruncate shared memory: " + std::string(std::strerror(err)));
  }
  return MapFd(fd, size, false);
}

StatusOr<std::unique_ptr<ShmArena>> ShmArena::MapFd(int fd, uint64_t size, bool huge) {
  // Populate now: the memory is this daemon's to hold (as dscli reserves it), and
  // neither puts nor gets should pay for first-touch page faults later.
  auto t0 = std::chrono::steady_clock::now();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return ResourceExhaustedError("mmap shared memory: " + std::string(std::strerror(err)));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (seconds > 1) TANDEM_LOG(INFO) << "arena populated in " << seconds << " s";
  return std::unique_ptr<ShmArena>(new ShmArena(fd, static_cast<uint8_t*>(p), size, huge));
}

ShmArena::~ShmArena() {
  munmap(base_, size_bytes_);
  close(fd_);
}

}  // namespace tandem::pool
