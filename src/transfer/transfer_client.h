// TransferClient: the consumer's side of the KV transfer (docs/KV_TRANSFER.md). Pulls a
// kept request's blocks from a producer into this engine's arena, then sends DONE so
// the producer frees them. Same-host producers are read through their memfd arena
// (mapped once per arena and cached); others over TCP, blocks received straight into
// place.
//
// Ownership: borrows the Transport and the destination KvMemory.
// Thread safety: Pull may run on several threads at once (distinct destination blocks).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "transfer/kv_memory.h"
#include "transfer/transport.h"

namespace tandem::transfer {

struct PullSpec {
  std::string host;
  int port = 0;
  std::string remote_request_id;
  std::vector<int32_t> remote_block_ids;  // the blocks to fetch, in order
  std::vector<int32_t> local_block_ids;   // where each goes (same length)
};

struct PullResult {
  bool used_shm = false;
  uint64_t bytes = 0;
};

class TransferClient {
 public:
  // `auth_token`: sent first on every connection when non-empty (the producer's token).
  TransferClient(Transport* transport, KvMemory dest, std::string model_fingerprint, bool enable_shm = true,
                 std::string auth_token = "");
  ~TransferClient();

  // Fetches the blocks, then releases the producer's lease (DONE). `cancel` (may be
  // null) is checked between frames. On error the destination blocks hold garbage.
  StatusOr<PullResult> Pull(const PullSpec& spec, const std::atomic<bool>* cancel = nullptr);

  // Ends a producer's lease without pulling (e.g. the request was aborted here).
  Status Release(const std::string& host, int port, const std::string& remote_request_id);

 private:
  StatusOr<PullResult> PullTcp(const PullSpec& spec, const std::atomic<bool>* cancel);
  StatusOr<std::unique_ptr<Connection>> Open(const Endpoint& endpoint);
  StatusOr<PullResult> PullShm(Connection& conn, const PullSpec& spec);
  struct Mapping {
    Mapping(const uint8_t* b, uint64_t s) : base(b), size(s) {}
    ~Mapping();
    const uint8_t* base;
    uint64_t size;
  };
  StatusOr<std::shared_ptr<Mapping>> MapArena(int fd, uint64_t arena_id, uint64_t size);

  Transport* const transport_;
  const KvMemory dest_;
  const std::string fingerprint_;
  const bool enable_shm_;
  const std::string auth_token_;

  std::mutex mu_;
  // arena_id -> mapping, at most kMaxMappings (a restarted producer has a new arena;
  // the old mapping goes once no pull uses it). Guarded by mu_.
  static constexpr size_t kMaxMappings = 8;
  std::unordered_map<uint64_t, std::shared_ptr<Mapping>> mappings_;
};

}  // namespace tandem::transfer
