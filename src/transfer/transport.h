// Transport: the byte streams the KV transfer runs on — TCP, and a same-host Unix socket
// that can also pass a file descriptor — behind one interface, plus a fault-injecting
// decorator for tests.
//
// Connections are blocking with per-operation timeouts (the transfer runs on its own
// threads); every call returns a Status, DeadlineExceeded on a timeout.
// Thread safety: one Connection is used by one thread at a time, except Shutdown(),
// which may be called from any thread to unblock it. Transports are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tandem::transfer {

struct Endpoint {
  std::string host;          // TCP: an IP address; Unix: ignored
  int port = 0;
  bool unix_socket = false;  // the abstract socket "@tandem-kv-<port>"
};

// The abstract Unix socket name of the transfer server on `port` (leading NUL).
std::string UnixSocketName(int port);
// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

class Connection {
 public:
  virtual ~Connection() = default;
  // Sends all bytes of the buffers, in order (one system call where possible).
  virtual Status Send(const void* const* data, const size_t* sizes, int count) = 0;
  Status Send(const void* data, size_t size) { return Send(&data, &size, 1); }
  // Receives exactly `size` bytes.
  virtual Status Recv(void* data, size_t size) = 0;
  // Unix sockets only: sends `data` with `fd` attached / receives it (*fd = -1 if none).
  virtual Status SendWithFd(const void* data, size_t size, int fd) = 0;
  virtual Status RecvWithFd(void* data, size_t size, int* fd) = 0;
  // Unblocks any call in progress; later calls fail.
  virtual void Shutdown() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) = 0;
};

struct SocketOptions {
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds io_timeout{10000};
};

// A Connection over a connected socket fd (takes ownership).
std::unique_ptr<Connection> MakeSocketConnection(int fd, const SocketOptions& options);

// Real sockets: TCP (TCP_NODELAY, large buffers) and abstract Unix sockets.
class SocketTransport final : public Transport {
 public:
  explicit SocketTransport(SocketOptions options = {}) : options_(options) {}
  StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) override;

 private:
  SocketOptions options_;
};

// Test decorator: fails connects, or breaks / corrupts the stream after a number of
// received bytes, or delays each receive.
struct FaultPlan {
  bool fail_connect = false;
  int64_t fail_after_recv_bytes = -1;     // >= 0: Recv fails once this many bytes came in
  int64_t corrupt_recv_byte_at = -1;      // >= 0: flips the bits of that received byte
  std::chrono::milliseconds recv_delay{0};
};

class FaultInjectingTransport final : public Transport {
 public:
  FaultInjectingTransport(Transport* inner, FaultPlan plan) : inner_(inner), plan_(plan) {}
  StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) override;
  int connects() const { return connects_.load(); }

 private:
  Transport* inner_;
  FaultPlan plan_;
  std::atomic<int> connects_{0};
};

}  // namespace tandem::transfer
