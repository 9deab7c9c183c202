// PoolClient: the client library of the KV-cache pool — what an engine's pool connector
// uses to save and load KV blocks through the pool worker on its node.
//
//   auto client = PoolClient::Connect({});            // DS_WORKER_ADDR selects the worker
//   auto stored = client->Put(keys, values);          // copies into the shared arena, seals
//   auto n      = client->ExistPrefix(keys);          // longest run of leading keys present
//   auto sizes  = client->GetInto(keys, buffers);     // copies out; -1 = miss
//   auto pinned = client->Get(keys);                  // zero copy: views into the arena
//
// Keys are strings of 1..1024 bytes (the connector uses
// "{model fingerprint}@tp{rank}@{block hash hex}"); values 1 byte .. 1 GiB. Batches of
// any size are split into requests of at most `max_keys_per_request` keys.
//
// Data path: the client connects to the worker's local Unix socket, receives the arena
// fd and maps it; a put reserves space, copies the value in place and seals it (a get
// never sees an unsealed object); a get pins the objects and returns their place in the
// arena. A key held by another worker is fetched by the local worker (a remote hit).
//
// Errors: Status is not OK only when the local worker cannot be reached or answers
// malformed (Unavailable / DeadlineExceeded / DataLoss) or the input is invalid
// (InvalidArgument). A key that is absent, evicted, or held by a dead or unreachable
// worker is a miss, never an error. Every call is bounded by the timeouts below; after
// a failure the next call reconnects (the worker may have restarted).
//
// Thread safety: all methods are thread-safe; up to `num_connections` calls run in
// parallel, further ones wait for a connection. Async variants run on the client's
// own threads; their futures may outlive nothing: the client must outlive them.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::pool {

struct PoolClientOptions {
  std::string worker_address;  // "IP:PORT"; empty = $DS_WORKER_ADDR
  std::string auth_token;      // empty = $TANDEM_POOL_AUTH_TOKEN (if set)
  std::chrono::milliseconds connect_timeout{2000};
  // One request's round trip (a get that fetches remotely included).
  std::chrono::milliseconds request_timeout{15000};
  size_t max_keys_per_request = 512;
  int num_connections = 4;
};

enum class PutOutcome : uint8_t {
  kStored = 0,   // written and sealed
  kExists = 1,   // the key was already there (or being written): skipped
  kNoSpace = 2,  // the arena is full of pinned/unsealed objects: not stored
  kInvalid = 3,  // empty value or one over the size limit: not stored
};

class Channel;  // one connection to the worker (internal)

// Where the worker found an object of a Get().
enum class ObjectSource : uint8_t {
  kMemory = 0,  // its arena
  kDisk = 1,    // its disk tier (read back into the arena)
  kRemote = 2,  // another worker (now a local replica)
};

// Pinned, zero-copy views of the objects of one Get(). The views stay valid (and the
// objects unevictable) until Release() or destruction.
// Thread safety: const methods from any thread; Release from one thread.
class PinnedObjects {
 public:
  ~PinnedObjects();
  PinnedObjects(const PinnedObjects&) = delete;
  PinnedObjects& operator=(const PinnedObjects&) = delete;

  size_t size() const { return items_.size(); }
  bool found(size_t i) const { return items_[i].found; }
  // Whether the object came from another worker (now a local replica).
  bool remote(size_t i) const { return items_[i].source == ObjectSource::kRemote; }
  ObjectSource source(size_t i) const { return items_[i].source; }
  // The object's bytes; empty when not found.
  std::span<const uint8_t> data(size_t i) const { return items_[i].data; }
  size_t num_found() const;
  // Unpins everything now (idempotent). The views become invalid.
  void Release();

 private:
  friend class PoolClient;
  struct Item {
    bool found = false;
    ObjectSource source = ObjectSource::kMemory;
    std::span<const uint8_t> data;
  };
  PinnedObjects() = default;
  std::vector<Item> items_;
  std::vector<std::string> pinned_keys_;  // to release
  std::shared_ptr<Channel> channel_;      // the connection holding the pins
  uint64_t channel_generation_ = 0;
  std::shared_ptr<void> mapping_;  // keeps the arena mapped
};

class PoolClient {
 public:
  // Connects one connection now (so a wrong address fails early); others lazily.
  static StatusOr<std::unique_ptr<PoolClient>> Connect(PoolClientOptions options = {});
  ~PoolClient();
  PoolClient(const PoolClient&) = delete;
  PoolClient& operator=(const PoolClient&) = delete;

  // Whether each key is in the pool (on this worker or a live other one).
  StatusOr<std::vector<bool>> Exist(const std::vector<std::string>& keys);
  // The number of leading keys that all exist (the connector's "lookup"). Stops asking
  // after the first missing request chunk.
  StatusOr<size_t> ExistPrefix(const std::vector<std::string>& keys);

  // Stores values[i] under keys[i] (copied into the arena). values.size() == keys.size().
  StatusOr<std::vector<PutOutcome>> Put(const std::vector<std::string>& keys,
                                        const std::vector<std::span<const uint8_t>>& values);

  // Soft-pins keys held in the local worker's arena (Mooncake Store's soft pin): evicted
  // last, until `ttl_ms` (0 = the worker's default) passes without a get. Per key: whether
  // it was pinned (false: not in the arena).
  StatusOr<std::vector<bool>> SoftPin(const std::vector<std::string>& keys, uint32_t ttl_ms = 0);

  // Zero-copy read: pins every found key (of any batch size; requests are chunked).
  StatusOr<std::unique_ptr<PinnedObjects>> Get(const std::vector<std::string>& keys);
  // Copying read: copies each found object into buffers[i]; returns each object's size,
  // or -1 for a miss (an object larger than its buffer also counts as a miss).
  StatusOr<std::vector<int64_t>> GetInto(const std::vector<std::string>& keys,
                                         const std::vector<std::span<uint8_t>>& buffers);

  // Asynchronous variants. The keys are copied; values/buffers are borrowed and must
  // stay valid until the future is ready.
  std::future<StatusOr<std::vector<bool>>> ExistAsync(std::vector<std::string> keys);
  std::future<StatusOr<std::vector<PutOutcome>>> PutAsync(
      std::vector<std::string> keys, std::vector<std::span<const uint8_t>> values);
  std::future<StatusOr<std::vector<int64_t>>> GetIntoAsync(std::vector<std::string> keys,
                                                           std::vector<std::span<uint8_t>> buffers);

  const std::string& worker_address() const { return options_.worker_address; }

 private:
  class Executor;
  explicit PoolClient(PoolClientOptions options);
  // A connected channel, locked for the caller (unlock via the returned guard).
  StatusOr<std::shared_ptr<Channel>> AcquireChannel();
  void ReleaseChannel(const std::shared_ptr<Channel>& channel);
  // Runs fn on a channel; on a transport failure of a reused connection, retries once
  // on a fresh one (the worker may have restarted).
  template <typename Fn>
  auto WithChannel(Fn&& fn) -> decltype(fn(std::declval<Channel&>()));

  PoolClientOptions options_;
  std::vector<std::shared_ptr<Channel>> channels_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace tandem::pool
