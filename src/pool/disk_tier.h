// DiskTier: the pool worker's second tier — objects leaving the arena by eviction are
// written to files in a spill directory (`--spill_directory`), and read back on a get.
// One file per object, named by the hash of its key, holding a header with the key, the
// length and an XXH64 checksum (docs/POOL.md "Disk tier"). The arena never waits on the
// disk: Spill() copies the bytes into a bounded queue that a writer thread drains; what
// does not fit (queue full, over the size limit, disk full, I/O error) is dropped and
// counted. The tier has its own LRU under `size_limit_bytes` with high/low watermarks.
// A worker restarted on the same directory re-indexes the files it finds there; a file
// whose header or length is wrong is deleted at the scan, and a file whose checksum does
// not match is deleted when read. Neither is ever served.
//
// Invariants:
//   * Bytes handed out by Read() matched the checksum written with them.
//   * A file being read holds a lease (reader count): it is neither evicted nor replaced
//     until the read ends.
//   * indexed bytes <= size_limit_bytes (the writer evicts before it writes).
//
// Thread safety: all methods are thread-safe. `on_dropped` runs on the writer thread
// with no DiskTier lock held.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tandem::pool {

struct DiskTierOptions {
  std::string directory;
  // 0 = 95 % of the free space of `directory` at start (as openYuanrong's worker does).
  uint64_t size_limit_bytes = 0;
  // The writer evicts LRU files when the next write would pass high * limit, down to
  // low * limit (Mooncake Store: 95 %, evicting 5 %).
  double high_watermark = 0.95;
  double low_watermark = 0.90;
  // Spilled bytes waiting for the writer; more is dropped (the arena never waits).
  uint64_t max_queued_bytes = 256ull << 20;
  // "Spill dropped" warnings are logged at most once per interval.
  std::chrono::milliseconds log_interval{10000};
  // Called with keys that left the tier for good (evicted files, dropped spills).
  std::function<void(const std::vector<std::string>&)> on_dropped;
};

struct DiskTierStats {
  uint64_t objects = 0;  // indexed files
  uint64_t bytes = 0;    // their values' bytes (headers excluded)
  uint64_t capacity_bytes = 0;
  uint64_t queued_bytes = 0;
  uint64_t spills = 0;         // files written
  uint64_t spill_drops = 0;    // objects not written (queue full, no room, I/O error)
  uint64_t evictions = 0;      // files evicted by the LRU watermark
  uint64_t corrupt = 0;        // files dropped for a bad header, length or checksum
  uint64_t bytes_written = 0;  // value bytes written
  uint64_t bytes_read = 0;     // value bytes read back
  uint64_t indexed_at_start = 0;
};

// FailedPrecondition naming the problem when `directory` does not exist, is not a
// directory, or is not writable by this process.
Status CheckSpillDirectory(const std::string& directory);

class DiskTier {
 public:
  // Checks the directory, resolves the size limit, indexes the files found there (least
  // recently modified first in the LRU), deletes bad ones and starts the writer.
  static StatusOr<std::unique_ptr<DiskTier>> Open(DiskTierOptions options);
  // Writes what is queued (at most `drain_timeout`), then stops the writer.
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Queues a copy of `size` bytes at `data` for writing. Never blocks on the disk. True
  // when the key is (or will be) on disk: already indexed or queued, or queued now.
  bool Spill(const std::string& key, const uint8_t* data, uint64_t size);
  // The value size of `key` when it is indexed or queued.
  std::optional<uint64_t> Size(const std::string& key) const;
  bool Contains(const std::string& key) const { return Size(key).has_value(); }
  // Copies the value of `key` into `dst` (exactly `size` bytes, the value's size),
  // verifying key, length and checksum. NotFound when absent; DataLoss when the file
  // was bad (it is deleted and counted; the key is then absent).
  Status Read(const std::string& key, uint8_t* dst, uint64_t size);
  // Indexed and queued keys (for re-announcing them in the directory).
  std::vector<std::string> Keys() const;
  // Blocks until the queue is empty and its drops reported (tests).
  void Flush();
  DiskTierStats stats() const;
  const std::string& directory() const { return options_.directory; }

 private:
  struct Entry {
    uint64_t size = 0;  // value bytes
    uint64_t name_hash = 0;
    uint32_t readers = 0;
    std::list<std::string>::iterator lru;
  };
  struct Pending {
    std::string key;
    std::string data;
  };

  explicit DiskTier(DiskTierOptions options);
  void Scan();
  void WriterLoop();
  // Writes one file (tmp + rename). Returns false on an I/O error (errno-based message).
  bool WriteFile(const Pending& p, std::string* error);
  // Removes LRU unread files until bytes + incoming <= target. mu_ held.
  void EvictLocked(uint64_t target, uint64_t incoming, std::vector<std::string>* evicted);
  void EraseLocked(std::unordered_map<std::string, Entry>::iterator it);
  std::string PathOf(uint64_t name_hash) const;
  void NoteDrop(const std::string& why);

  DiskTierOptions options_;
  uint64_t high_bytes_ = 0;
  uint64_t low_bytes_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Entry> index_;
  std::unordered_map<uint64_t, std::string> by_hash_;  // file name hash -> key
  std::list<std::string> lru_;                         // least recently used first
  std::deque<Pending> queue_;
  std::unordered_map<std::string, const Pending*> queued_;  // key -> queue_ element
  uint64_t queued_bytes_ = 0;
  bool busy_ = false;  // the writer is handling an item (callbacks included)
  bool stopping_ = false;
  DiskTierStats stats_;
  std::chrono::steady_clock::time_point last_drop_log_{};
  uint64_t drops_since_log_ = 0;
  std::thread writer_;
};

}  // namespace tandem::pool
