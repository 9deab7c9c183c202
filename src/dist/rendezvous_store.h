// The key-value store the ranks of an expert-parallel group meet through: rank 0 serves
// it on --data-parallel-address:(--data-parallel-rpc-port + 1); every rank (rank 0 too)
// writes its Gloo addresses there and reads the others' (Gloo's rendezvous::Store
// contract: set, and a get that waits until the key exists). It plays the part of
// PyTorch's TCPStore, which this Gloo release does not ship.
//
// Wire: frames of an 8-byte header [op u8][status u8][key_len u16][value_len u32] (little
// endian) and a body of key then value. op 1 SET (status 0 back), op 2 GET (status 0
// with the value, 1 when the key does not exist yet), op 3 ADD (the value is a decimal
// increment; the key's counter, from 0, is incremented and its new value returned in
// decimal; PyTorch TCPStore's add). Bodies over 16 MiB are refused.
//
// Thread safety: the server runs its own threads; a client is used by one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "net/socket_connection.h"
#include "net/socket_listener.h"

namespace tandem::dist {

class RendezvousStoreServer {
 public:
  // Listens on host:port (an IP literal; port 0 picks one, see port()).
  static StatusOr<std::unique_ptr<RendezvousStoreServer>> Start(const std::string& host, uint16_t port);
  ~RendezvousStoreServer();  // stops accepting, closes every connection, joins
  RendezvousStoreServer(const RendezvousStoreServer&) = delete;
  RendezvousStoreServer& operator=(const RendezvousStoreServer&) = delete;

  uint16_t port() const { return listener_->port(); }

 private:
  explicit RendezvousStoreServer(std::unique_ptr<net::SocketListener> listener);
  void AcceptLoop();
  void Serve(net::SocketConnection* conn);

  std::unique_ptr<net::SocketListener> listener_;
  std::mutex mu_;
  std::map<std::string, std::string> values_;
  std::vector<std::unique_ptr<net::SocketConnection>> conns_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  std::thread accept_;
};

class RendezvousStoreClient {
 public:
  // Connects to host:port, retrying until `timeout`: the server (rank 0) may start
  // later. Logs a line every few seconds while it waits; DeadlineExceeded naming the
  // address when nothing answered in time.
  // `cancel` (optional) set from another thread ends the wait (Cancelled).
  static StatusOr<std::unique_ptr<RendezvousStoreClient>> Connect(const std::string& host, uint16_t port,
                                                                  std::chrono::milliseconds timeout,
                                                                  const std::atomic<bool>* cancel = nullptr);

  Status Set(const std::string& key, const std::string& value);
  // Adds `delta` to the counter `key` (0 when new) and returns the new value.
  StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // The value of `key`, waiting (polling) until it exists or `timeout` passes
  // (DeadlineExceeded naming the key) or `cancel` is set (Cancelled).
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout,
                            const std::atomic<bool>* cancel = nullptr);

 private:
  explicit RendezvousStoreClient(std::unique_ptr<net::SocketConnection> conn, std::string address)
      : conn_(std::move(conn)), address_(std::move(address)) {}
  // One request and its answer: the answer's status byte, the value in *value.
  StatusOr<int> Call(uint8_t op, const std::string& key, const std::string& value, std::string* answer);

  std::unique_ptr<net::SocketConnection> conn_;
  std::string address_;
};

}  // namespace tandem::dist
