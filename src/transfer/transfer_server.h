// TransferServer: the producer's side of the KV transfer (docs/KV_TRANSFER.md). Serves
// kept requests' blocks to decode instances over TCP, and over an abstract Unix
// socket by passing the arena's memfd (same-host path).
//
// One thread accepts per listener; each connection gets a thread (at most
// max_connections; more are refused). Reads blocks only under a pinned lease.
// Security (docs/SECURITY.md): with an auth_token every connection must open with
// HELLO(token); the Unix socket (which hands out the arena's memfd) also refuses peers
// that run as another user than this process (root excepted), token or not.
// Ownership: borrows the KvMemory's arena and the LeaseTable, which outlive it.
// Thread safety: Start/Stop from one owner thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "net/socket_listener.h"
#include "transfer/kv_memory.h"
#include "transfer/lease_table.h"
#include "transfer/transport.h"

namespace tandem::transfer {

struct TransferServerOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;                 // 0 = any free port (tests); see port() after Start
  bool enable_unix_socket = true;  // needs a shared (memfd) arena
  int max_connections = 64;
  std::string auth_token;       // non-empty: every connection must open with HELLO(token)
  SocketOptions socket;
};

struct TransferServerStats {
  std::atomic<uint64_t> blocks_sent{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> shm_pulls{0};
  std::atomic<uint64_t> tcp_pulls{0};
  std::atomic<uint64_t> errors{0};
};

class TransferServer {
 public:
  TransferServer(TransferServerOptions options, KvMemory memory, LeaseTable* leases, std::string model_fingerprint);
  ~TransferServer();

  Status Start();
  void Stop();
  int port() const { return port_; }
  const TransferServerStats& stats() const { return stats_; }

  // Serves one connection until it ends (the per-connection thread's body; public so
  // the frame fuzzer can drive it with arbitrary bytes).
  void Serve(Connection& conn, bool unix_socket);

 private:
  void AcceptLoop(net::SocketListener& listener);
  Status HandlePull(Connection& conn, const std::string& payload, bool shm, bool* pinned,
                    std::string* pinned_id);

  const TransferServerOptions options_;
  const KvMemory memory_;
  LeaseTable* const leases_;
  const std::string fingerprint_;
  TransferServerStats stats_;
  int port_ = 0;
  std::vector<std::unique_ptr<net::SocketListener>> listeners_;
  std::vector<std::thread> acceptors_;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::unordered_set<Connection*> live_;  // guarded by mu_; shut down on Stop
  std::condition_variable idle_cv_;       // signalled when a connection thread ends
  int num_connections_ = 0;               // guarded by mu_ (detached connection threads)
};

}  // namespace tandem::transfer
