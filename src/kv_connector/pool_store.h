// PoolStore: the engine's client of the KV-cache pool, used by PoolConnector (docs/POOL.md;
// vLLM-Ascend's AscendStoreConnector). Saves new full blocks to the local pool
// worker, write-behind, skipping keys that exist; looks up the longest run of pool keys
// beyond the local prefix hit; loads those blocks into the arena.
//
// Keys are "{model fingerprint}@tp{rank}@{block hash hex}" (the block hash already
// chains the model fingerprint and every token before it), one object per block holding
// all layers' K then V — deterministic by construction, so any engine of the same model
// on any node finds what another computed.
//
// Failure model: the pool is an optimisation. A worker that is down, restarting, hung or
// answering garbage turns lookups into misses and saves into drops; after a failure the
// store leaves the pool alone for a back-off period, so a dead worker never costs a
// request more than one bounded round trip. Nothing it does can fail a request.
//
// Thread safety: Lookup and Load may run on any thread (the engine thread, pull
// workers); Save only from the engine thread (it reads blocks the engine owns at that
// moment, copying them before it returns).
#pragma once

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "transfer/kv_memory.h"

namespace tandem {

namespace pool {
class PoolClient;
}

struct PoolStoreOptions {
  std::string worker_address;  // empty = $DS_WORKER_ADDR
  int tp_rank = 0;
  std::chrono::milliseconds request_timeout{3000};
  std::chrono::milliseconds backoff{5000};       // no pool calls for this long after a failure
  size_t max_pending_save_bytes = 256u << 20;    // write-behind staging bound; more is dropped
  // Loaded blocks are soft-pinned in the pool for this long without a read (0 = never):
  // a prefix that was reused is kept over colder ones (Mooncake Store's soft pin).
  std::chrono::milliseconds soft_pin_ttl{0};
};

struct PoolLoadResult {
  int blocks_loaded = 0;  // leading blocks now in the arena
  int blocks_disk = 0;    // of which the local worker read from its disk tier
  int blocks_remote = 0;  // of which another worker held
};

struct PoolStoreStats {
  std::atomic<uint64_t> saved_blocks{0};
  std::atomic<uint64_t> skipped_existing{0};
  std::atomic<uint64_t> dropped_saves{0};
  std::atomic<uint64_t> loaded_local{0};
  std::atomic<uint64_t> loaded_disk{0};
  std::atomic<uint64_t> loaded_remote{0};
  std::atomic<uint64_t> soft_pinned{0};
  std::atomic<uint64_t> failures{0};
};

class PoolStore {
 public:
  PoolStore(PoolStoreOptions options, std::string model_fingerprint, transfer::KvMemory arena);
  ~PoolStore();

  std::string Key(const kv::BlockHash& hash) const;

  // How many of `hashes` (in order, from the first) the pool holds, as a leading run.
  int Lookup(const std::vector<kv::BlockHash>& hashes);

  // Copies the pool objects of `hashes` into `blocks` (same length), stopping at the
  // first one missing or malformed.
  PoolLoadResult Load(const std::vector<kv::BlockHash>& hashes, const std::vector<int32_t>& blocks);

  // Queues `block` (whose KV is computed, under `hash`) for saving; copies it now.
  void Save(const kv::BlockHash& hash, int32_t block);

  const PoolStoreStats& stats() const { return stats_; }
  // Called (from the saver thread, or the engine thread for drops at Save) with how many
  // blocks were stored, skipped as existing, or dropped. Set before the first Save.
  void SetSaveObserver(std::function<void(uint64_t stored, uint64_t existing, uint64_t dropped)> observer) {
    observer_ = std::move(observer);
  }
  // Waits until every queued save was sent (tests).
  void Flush();

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct PendingSave {
    std::string key;
    // 64-byte aligned: glibc's memcpy into a misaligned destination is several times
    // slower on some CPUs (measured ~1.2 GB/s vs ~7 GB/s here).
    std::unique_ptr<uint8_t, FreeDeleter> bytes;
    size_t size = 0;
  };
  // A connected client, or null while backing off / unreachable.
  std::shared_ptr<pool::PoolClient> Client();
  void Failed(const Status& status);
  void SaveLoop();
  // Inserts `hash`; true if it was already there.
  bool Remember(const kv::BlockHash& hash);

  const PoolStoreOptions options_;
  const std::string prefix_;  // "{fingerprint}@tp{rank}@"
  const transfer::KvMemory arena_;

  std::mutex client_mu_;
  std::shared_ptr<pool::PoolClient> client_;                  // guarded by client_mu_
  std::chrono::steady_clock::time_point retry_after_{};        // guarded by client_mu_

  std::mutex save_mu_;
  std::condition_variable save_cv_;
  std::deque<PendingSave> pending_;     // guarded by save_mu_
  size_t pending_bytes_ = 0;            // guarded by save_mu_
  bool saving_ = false;                 // guarded by save_mu_ (a batch is in flight)
  bool stopping_ = false;               // guarded by save_mu_
  // Hashes saved or loaded recently: not sent again. A fixed direct-mapped table, so the
  // connector's memory does not grow with the number of blocks it has seen.
  std::mutex remember_mu_;
  std::vector<kv::BlockHash> remembered_;  // guarded by remember_mu_; all zero = empty
  PoolStoreStats stats_;
  std::function<void(uint64_t, uint64_t, uint64_t)> observer_;
  std::thread saver_;
};

}  // namespace tandem
