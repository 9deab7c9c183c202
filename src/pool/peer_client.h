// PeerClient: the worker's RPCs to other workers (DIR_PUT, DIR_DEL, DIR_LOOKUP, FETCH)
// over pooled TCP connections, every call bounded by connect and I/O timeouts. A peer
// that failed is skipped (Unavailable at once) for `down_backoff`, so a dead worker costs
// one timeout, not one per request.
//
// Thread safety: all methods are thread-safe; calls to one peer run in parallel on
// separate connections.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/socket_connection.h"
#include "pool/frame_io.h"
#include "pool/wire.h"

namespace tandem::pool {

struct PeerClientOptions {
  std::string auth_token;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds io_timeout{3000};
  std::chrono::milliseconds down_backoff{2000};
  size_t max_idle_per_peer = 8;
};

class PeerClient {
 public:
  explicit PeerClient(PeerClientOptions options) : options_(std::move(options)) {}

  Status DirPut(const std::string& peer, const std::string& holder,
                const std::vector<std::string>& keys);
  Status DirDel(const std::string& peer, const std::string& holder,
                const std::vector<std::string>& keys);
  // One holder per key ("" = unknown).
  StatusOr<std::vector<std::string>> DirLookup(const std::string& peer,
                                               const std::vector<std::string>& keys);
  // The objects a peer sent back: `objects[i]` views the bytes of keys[i] inside
  // `buffer` (nullopt = the peer does not hold it). No per-object copy.
  struct Fetched {
    std::string buffer;
    std::vector<std::optional<std::string_view>> objects;
  };
  // keys.size() <= kMaxFetchKeys.
  StatusOr<Fetched> Fetch(const std::string& peer, const std::vector<std::string>& keys);

  // Forgets pooled connections and the down mark of `peer` (e.g. it rejoined).
  void Reset(const std::string& peer);

 private:
  // Sends one request and returns the response body (status checked).
  StatusOr<std::string> Call(const std::string& peer, MsgType type, std::string body);
  StatusOr<std::unique_ptr<net::SocketConnection>> Connect(const std::string& peer);

  PeerClientOptions options_;
  std::mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<net::SocketConnection>>> idle_;
  std::map<std::string, std::chrono::steady_clock::time_point> down_until_;
  uint64_t next_request_id_ = 1;
};

}  // namespace tandem::pool
